"""simulate(): real EngineCores, the live router's RouterCore and BackendPool, the autoscaler's policy."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from infctl.autoscaler import policy as autoscaler_policy
from infctl.autoscaler.settings import PolicyConfig, UnitConfig
from infctl.bench import compare
from infctl.bench.compare import load_result
from infctl.bench.config import LoadPlan, Stage
from infctl.bench.io import save_json
from infctl.bench.workloads import LengthDist, RandomSpec, SharedPrefixSpec, build_workload
from infctl.errors import ConfigError
from infctl.router.core import RouterCore
from infctl.router.pool import BackendPool
from infctl.router.snapshot import RequestInfo, Snapshot
from infctl.sim.cluster import AutoscaleSettings, SimConfig, simulate
from infctl.sim.cluster import scaling as sim_scaling
from infctl.sim.cluster.engine_loop import Simulation
from infctl.sim.cluster.prompts import prompt_source
from infctl.sim.profiles import get_profile
from infctl.sim.scheduler import EngineCore

SMALL_KV = get_profile("llama3-8b-h100").with_overrides(num_gpu_blocks=600)
SHARED = SharedPrefixSpec(groups=24, prefix_tokens=1024, zipf=0.5, input=LengthDist(mean=64),
                          output=LengthDist(mean=16))  # fmt: skip


def _shared(policy: str, n: int = 300, seed: int = 0) -> SimConfig:
    return SimConfig(workload=SHARED, load=LoadPlan(stages=[Stage(rate=40, num_requests=n)]), engines=6,
                     profile=SMALL_KV, policy=policy, seed=seed)  # fmt: skip


def _sim(cfg: SimConfig) -> Simulation:
    return Simulation(cfg, prompt_source(build_workload(cfg.workload, cfg.api, cfg.seed)))


def test_every_request_completes_with_bench_metrics() -> None:
    r = simulate(_shared("cache_aware", n=120))
    s = r.bench.summary
    assert (s.total, s.completed, s.failed) == (120, 120, 0)
    assert all(rec.output_tokens == len(rec.chunk_times) for rec in r.bench.requests)
    assert s.ttft.count == 120 and s.ttft["p50"] > 0
    assert r.gpu_hours == pytest.approx(6 * r.sim_time_s / 3600, rel=0.05)


def test_same_seed_same_result_other_seed_other_result() -> None:
    def key(seed: int) -> list[tuple[float, ...]]:
        r = simulate(_shared("cache_aware", n=80, seed=seed))
        return [(x.sent_s, *x.chunk_times) for x in r.bench.requests]

    assert key(3) == key(3)
    assert key(3) != key(4)


def test_the_router_is_the_live_routercore_and_decides_as_it_would() -> None:
    sim = _sim(_shared("cache_aware", n=100))
    assert type(sim.router.core) is RouterCore and type(sim.router.pool) is BackendPool
    assert all(type(e.core) is EngineCore for e in sim.fleet.engines)
    assert sim_scaling.__dict__["desired_replicas"] is autoscaler_policy.desired_replicas
    core = sim.router.core
    real_route = core.route
    checked: list[str] = []

    def route(snapshot: Snapshot, request: RequestInfo) -> Any:
        # The same snapshot through a fresh copy of the router's policy and learned state decides the same.
        twin = copy.deepcopy(core)
        expected = twin.policy.decide(snapshot, request, matches=twin.matches(request), state=twin.state)
        got = real_route(snapshot, request)
        assert got.backend_id == expected.backend_id and got.reason == expected.reason
        checked.append(got.reason)
        return got

    core.route = route  # type: ignore[method-assign]
    sim.run()
    assert len(checked) == 100 and "prefix_hit" in checked


def test_snapshots_carry_scraped_signals_and_live_inflight_counts() -> None:
    sim = _sim(_shared("least_load", n=60))
    seen: list[Snapshot] = []
    real_route = sim.router.core.route

    def route(snapshot: Snapshot, request: RequestInfo) -> Any:
        seen.append(snapshot)
        return real_route(snapshot, request)

    sim.router.core.route = route  # type: ignore[method-assign]
    sim.run()
    late = seen[-1]
    ages = [late.state(b.id).signals_age_s for b in late.backends]
    assert all(0 <= a <= sim.cfg.scrape_interval_s + 1e-9 for a in ages)
    assert any(late.state(b.id).inflight for b in late.backends)


def test_prefix_aware_routing_beats_round_robin_on_hit_rate() -> None:
    rr = simulate(_shared("round_robin"))
    ca = simulate(_shared("cache_aware"))
    assert rr.hit_rate is not None and ca.hit_rate is not None
    assert ca.hit_rate > rr.hit_rate + 0.2
    assert ca.bench.summary.ttft["p50"] < rr.bench.summary.ttft["p50"]


def test_autoscaler_adds_engines_under_a_ramp_and_removes_them_when_quiet() -> None:
    policy = PolicyConfig(units=(UnitConfig("both", min=1, max=12),), queue_up=2.0, up_cooldown_s=5.0,
                          down_window_s=10.0, down_cooldown_s=5.0, max_step_down=4)  # fmt: skip
    heavy = RandomSpec(input=LengthDist(mean=3000), output=LengthDist(mean=16))
    cfg = SimConfig(
        workload=heavy,
        load=LoadPlan(stages=[Stage(rate=2, rate_end=50, duration_s=20), Stage(rate=0.2, duration_s=60)]),
        engines=1, policy="least_load",
        autoscale=AutoscaleSettings(policy=policy, interval_s=2.0, startup_s=5.0),
    )  # fmt: skip
    r = simulate(cfg)
    desired = [p.desired for p in r.replicas]
    peak = max(desired)
    assert peak >= 3
    assert desired[-1] < peak  # scaled back down in the quiet stage
    ups = [e for e in r.scale_events if e.desired > e.current]
    downs = [e for e in r.scale_events if e.desired < e.current]
    assert ups and downs and ups[0].t < downs[0].t
    assert r.bench.summary.failed == 0
    # drained engines stopped, and cost less than a fleet at the peak for the whole run
    assert r.gpu_hours < peak * r.sim_time_s / 3600


def test_result_round_trips_through_the_bench_schema(tmp_path: Path) -> None:
    a = simulate(_shared("round_robin", n=60))
    b = simulate(_shared("cache_aware", n=60))
    pa, pb = save_json(a.to_dict(), tmp_path / "a.json"), save_json(b.to_dict(), tmp_path / "b.json")
    da, db = load_result(pa), load_result(pb)
    assert da["simulation"]["gpu_hours"] == pytest.approx(a.gpu_hours, abs=1e-6)
    assert len(da["simulation"]["replicas"]["t"]) >= 1
    cmp = compare(da, db)
    hit = cmp.row("server prefix-cache hit rate")
    assert hit.a == pytest.approx(a.hit_rate, abs=1e-6) and hit.better
    assert cmp.row("TTFT p50").a == pytest.approx(a.bench.summary.ttft["p50"] * 1000, rel=1e-4)
    assert json.loads(json.dumps(da)) == da


def test_prompts_longer_than_the_context_fail_like_the_engine_would() -> None:
    tiny = get_profile("tiny-cpu")
    lengths = LengthDist(kind="uniform", low=100, high=8000, mean=4050)
    cfg = SimConfig(
        workload=RandomSpec(input=lengths, output=LengthDist(mean=8)),
        load=LoadPlan(stages=[Stage(rate=10, num_requests=40)]),
        engines=2,
        profile=tiny,
    )
    r = simulate(cfg)
    failed = [x for x in r.bench.requests if x.error is not None]
    assert failed and all(x.status == 400 for x in failed)
    assert r.bench.summary.completed == 40 - len(failed)
    assert any("max_model_len" in w for w in r.bench.warnings)


def test_bad_settings_raise_config_errors() -> None:
    with pytest.raises(ConfigError):
        SimConfig(engines=0)
    with pytest.raises(ConfigError):
        SimConfig(load=LoadPlan(stages=[Stage()]))  # replay needs a trace
    with pytest.raises(ConfigError):
        SimConfig(engines=20, autoscale=AutoscaleSettings(
            policy=PolicyConfig(units=(UnitConfig("both", min=1, max=8),))))  # fmt: skip


def test_a_closed_loop_whose_every_request_is_refused_moves_on_without_recursing() -> None:
    tiny_context = SMALL_KV.with_overrides(max_model_len=64)
    cfg = SimConfig(workload=RandomSpec(input=LengthDist(mean=100), output=LengthDist(mean=8)),
                    load=LoadPlan(stages=[Stage(concurrency=4, num_requests=1500)]), engines=1,
                    profile=tiny_context)  # fmt: skip
    r = simulate(cfg)
    assert r.bench.summary.failed == 1500
    assert r.bench.summary.error_kinds == {"http_400": 1500}
    # Each refusal reaches its client a round trip later, and only then does the loop send the next one.
    assert r.sim_time_s == pytest.approx(1500 / 4 * 0.001, rel=0.01)
