"""The simulator can feed engines' KV events to the router's precise index, as live engines publish them."""

from __future__ import annotations

import dataclasses

from infctl.bench.config import LoadPlan, Stage
from infctl.bench.workloads import LengthDist, SharedPrefixSpec, build_workload
from infctl.sim.cluster import SimConfig, simulate
from infctl.sim.cluster.engine_loop import Simulation
from infctl.sim.cluster.prompts import prompt_source
from infctl.sim.profiles import get_profile

SMALL_KV = get_profile("llama3-8b-h100").with_overrides(num_gpu_blocks=600)
SHARED = SharedPrefixSpec(groups=24, prefix_tokens=1024, zipf=0.5, input=LengthDist(mean=64),
                          output=LengthDist(mean=16))  # fmt: skip
CFG = SimConfig(workload=SHARED, load=LoadPlan(stages=[Stage(rate=40, num_requests=200)]), engines=6,
                profile=SMALL_KV, policy="cache_aware", kv_events=True)  # fmt: skip


def _run(cfg: SimConfig) -> Simulation:
    sim = Simulation(cfg, prompt_source(build_workload(cfg.workload, cfg.api, cfg.seed)))
    sim.run()
    return sim


def test_with_kv_events_the_precise_index_holds_what_each_engine_caches() -> None:
    sim = _run(CFG)
    index = sim.router.core.precise
    assert index.any_source
    for engine in sim.fleet.engines:
        # One router block per engine block (both 16 tokens), re-hashed from the events' token ids: the
        # engine hashes its own way (seeded by the model, as vLLM's differ from any router's).
        held, cached = index.blocks(engine.id), set(engine.core.pool.by_hash)
        assert len(held) == len(cached) > 0
        assert not held & cached


def test_without_kv_events_the_router_learns_from_its_own_decisions() -> None:
    sim = _run(dataclasses.replace(CFG, kv_events=False))
    assert not sim.router.core.precise.any_source


def test_kv_events_keep_the_hit_rate_of_prefix_routing() -> None:
    with_events = simulate(CFG)
    rr = simulate(dataclasses.replace(CFG, policy="round_robin"))
    assert with_events.hit_rate is not None and rr.hit_rate is not None
    assert with_events.hit_rate > rr.hit_rate + 0.2
