"""The comparisons' arms use the router's presets, the autoscaler's policy and the engine's tier: imported."""

from __future__ import annotations

from typing import Any

import pytest

from infctl.autoscaler import policy as autoscaler_policy
from infctl.autoscaler import threshold
from infctl.autoscaler.settings import PolicyConfig
from infctl.autoscaler.threshold import ThresholdConfig
from infctl.errors import ConfigError
from infctl.router.core import RouterCore
from infctl.router.policies.buckets import parse_buckets
from infctl.router.policies.pipeline import build_policy
from infctl.router.policies.presets import PRESETS
from infctl.router.snapshot import RequestInfo
from infctl.sim.cluster import SimConfig
from infctl.sim.cluster import scaling as sim_scaling
from infctl.sim.cluster.fleet import SimEngine
from infctl.sim.cluster.routing import SimRouter
from infctl.sim.cluster.scenarios import SCENARIOS, ScenarioSize, SimScenario, build_scenarios
from infctl.sim.cluster.scenarios.diurnal import diurnal_plan, level_at, mean_level
from infctl.sim.offload import OffloadTier
from infctl.sim.profiles import get_profile
from infctl.sim.scheduler import EngineCore


@pytest.fixture(scope="module")
def scenarios(tmp_path_factory: pytest.TempPathFactory) -> list[SimScenario]:
    trace = tmp_path_factory.mktemp("t") / "t.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 512, "output_length": 4, "hash_ids": [1]}\n')
    return build_scenarios([], ScenarioSize(trace=trace))


def _preset(policy: str | Any) -> str:
    return policy if isinstance(policy, str) else str(policy["preset"])


def test_every_arm_routes_with_a_router_preset(scenarios: list[SimScenario]) -> None:
    assert [s.name for s in scenarios] == list(SCENARIOS)
    for sc in scenarios:
        for arm in sc.arms:
            policy = arm.config(sc.base).policy
            assert _preset(policy) in PRESETS, (sc.name, arm.label)
            build_policy(policy)  # the router's own parser accepts it as is
            if not isinstance(policy, str) and "buckets" in policy:
                parse_buckets(policy["buckets"])
                assert set(arm.pools) == {"short", "long"}


def test_autoscaled_arms_run_the_autoscalers_policy(scenarios: list[SimScenario]) -> None:
    for sc in (s for s in scenarios if s.name.startswith("autoscaling-")):
        static, reactive, keda, ours = (arm.config(sc.base) for arm in sc.arms)
        assert static.autoscale is None
        assert reactive.autoscale is not None and isinstance(reactive.autoscale.policy, PolicyConfig)
        assert reactive.autoscale.policy.forecast is None
        assert keda.autoscale is not None and isinstance(keda.autoscale.policy, ThresholdConfig)
        assert ours.autoscale is not None and isinstance(ours.autoscale.policy, PolicyConfig)
        assert ours.autoscale.policy.forecast is not None
        # Same day, engines and seed for every arm.
        for c in (static, reactive, keda, ours):
            assert (c.load, c.workload, c.seed, c.profile) == (
                sc.base.load,
                sc.base.workload,
                sc.base.seed,
                sc.base.profile,
            )
    # The simulator decides with the daemon's functions themselves.
    assert vars(sim_scaling)["desired_replicas"] is autoscaler_policy.desired_replicas
    assert vars(sim_scaling)["threshold_replicas"] is threshold.threshold_replicas


def test_tier_arms_give_engines_the_offload_tier(scenarios: list[SimScenario]) -> None:
    sc = next(s for s in scenarios if s.name == "kv-tier")
    tiers = [arm.config(sc.base).engine_options.get("offload") for arm in sc.arms]
    assert tiers[0] is None and all(isinstance(t, OffloadTier) for t in tiers[1:])
    assert [t.load_gbps for t in tiers[1:] if t] == [50.0, 5.0]
    core = EngineCore(sc.base.profile, **arm_options(sc, 1))
    assert core.stats().tier is not None


def arm_options(sc: SimScenario, i: int) -> dict[str, Any]:
    return dict(sc.arms[i].config(sc.base).engine_options)


def test_the_sim_router_places_engines_in_pools_and_decides_as_the_routers_core() -> None:
    buckets = [{"name": "short", "max_tokens": 2048, "pools": ["short"]}, {"name": "long", "pools": ["long"]}]
    policy = {"preset": "least_load", "buckets": buckets}
    router = SimRouter(policy, ["short", "short", "long"])
    assert isinstance(router.core, RouterCore)
    profile = get_profile("tiny-cpu")
    for i in range(3):
        router.add(SimEngine(f"e{i}", EngineCore(profile), asked_at=0.0, ready_at=0.0, state="ready"))
    snap = router.pool.snapshot(0.0)
    assert [b.pool for b in snap.backends] == ["short", "short", "long"]
    long_req = RequestInfo("r1", prompt_tokens=9000)
    short_req = RequestInfo("r2", prompt_tokens=100)
    reference = RouterCore(build_policy(policy))
    for req, pool in ((long_req, "long"), (short_req, "short")):
        chosen = router.route(req, 16, 0.0)
        assert chosen == reference.decide(snap, req).backend_id
        assert router.pool.backend(chosen).pool == pool


def test_a_diurnal_day_is_24_hourly_ramps_at_the_shapes_levels() -> None:
    plan = diurnal_plan("consumer", 10.0, 2400.0)
    assert len(plan.stages) == 24 and plan.stages[12].rate == pytest.approx(10.0)
    mean = sum(s.mean_rate or 0 for s in plan.stages) / 24
    assert mean == pytest.approx(10.0 * mean_level("consumer"))


def test_a_spiky_day_is_its_base_shape_with_bursts() -> None:
    plan = diurnal_plan("spiky", 10.0, 2400.0)
    assert sum(s.duration_s or 0 for s in plan.stages) == pytest.approx(2400.0)
    mean = sum((s.mean_rate or 0) * (s.duration_s or 0) for s in plan.stages) / 2400.0
    assert mean == pytest.approx(10.0 * mean_level("spiky"))
    assert mean_level("spiky") > mean_level("business")
    # At 03:00 the night rate jumps to 0.6 of the peak within three minutes and holds for half an hour.
    assert level_at("spiky", 3.3) == pytest.approx(0.6) and level_at("business", 3.3) < 0.1
    assert max(s.rate or 0 for s in plan.stages) == pytest.approx(12.5)


def test_pools_must_name_one_pool_per_starting_engine() -> None:
    with pytest.raises(ConfigError, match="pools names 2 engines, the fleet starts with 3"):
        SimConfig(engines=3, pools=("short", "long"))
