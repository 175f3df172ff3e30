"""The demo's comparisons, run small on in-process engines and router: both arms run, rows are complete.

The engines run in vLLM's dev mode (``server_dev_mode``, ``VLLM_SERVER_DEV_MODE=1``), as the demo starts
them: the comparisons empty their prefix caches before each arm through its ``/reset_prefix_cache``."""

from __future__ import annotations

import dataclasses

import httpx
import pytest

from infctl.bench.config import LoadPlan, Stage
from infctl.bench.result import BenchResult
from infctl.bench.scenarios import Arm, bucketing_scenario, prefix_scenario, run_scenario, scenario_rows
from infctl.engines.vllm import TIME_TO_FIRST_TOKEN
from infctl.errors import EngineError
from infctl.router.snapshot import Backend
from infctl.telemetry.prometheus import parse_metrics, value

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


async def test_both_scenarios_run_each_arm_and_report_the_seed_measures(start_sim, start_router) -> None:
    sims = await start_sim(
        instances=4, time_scale=0.02, num_gpu_blocks=2048, max_model_len=32768, server_dev_mode=True
    )
    router = await start_router([Backend(id=u, url=u) for u in sims.urls], policy="round_robin")
    small = LoadPlan(stages=[Stage(rate=40, num_requests=24)])
    for scenario in (prefix_scenario(4), bucketing_scenario(4)):
        res = await run_scenario(
            dataclasses.replace(scenario, load=small), router_url=router, engine_urls=sims.urls, model=MODEL
        )
        assert res.baseline.summary.completed == 24 and res.infctl.summary.completed == 24
        rows = {r[0]: r for r in scenario_rows(res)}
        assert rows["failed requests"][1:3] == ("0", "0")
        assert all(r[1] != "n/a" and r[2] != "n/a" for r in rows.values())
        if "hit rate" in next(iter(rows)):
            # Caches are emptied between arms, so the second arm cannot inherit the first one's hits.
            assert res.infctl.server is not None and res.infctl.server.hit_rate is not None
        else:
            assert "short TTFT p99" in rows


async def test_a_router_that_requires_a_token_is_set_up_with_it(start_sim, start_router) -> None:
    # As the local target's router (and so `infctl demo`'s) does: its admin API refuses a bare request.
    sims = await start_sim(instances=2, time_scale=0.02, server_dev_mode=True)
    router = await start_router([Backend(id=u, url=u) for u in sims.urls], admin_token="s3cret")
    tiny = dataclasses.replace(prefix_scenario(2), load=LoadPlan(stages=[Stage(rate=40, num_requests=4)]))
    where = {"router_url": router, "engine_urls": sims.urls, "model": MODEL}
    with pytest.raises(EngineError, match="401"):
        await run_scenario(tiny, **where)
    res = await run_scenario(tiny, **where, admin_token="s3cret")
    assert res.baseline.summary.completed == 4 and res.infctl.summary.completed == 4


async def test_after_arm_hears_each_arm_once_its_requests_are_done(start_sim, start_router) -> None:
    # The length-pools benchmark reads the engines' own TTFT histograms there, one window per arm.
    sims = await start_sim(instances=2, time_scale=0.02, server_dev_mode=True)
    router = await start_router([Backend(id=u, url=u) for u in sims.urls])
    tiny = dataclasses.replace(bucketing_scenario(2), load=LoadPlan(stages=[Stage(rate=40, num_requests=6)]))
    heard: list[tuple[str, int, float]] = []

    async def after_arm(arm: Arm, result: BenchResult) -> None:
        async with httpx.AsyncClient(trust_env=False) as client:
            texts = [(await client.get(f"{u}/metrics")).text for u in sims.urls]
        family = TIME_TO_FIRST_TOKEN
        served = sum(value(parse_metrics(t, {f"{family}_count"}), f"{family}_count") for t in texts)
        heard.append((arm.label, result.summary.completed, served))

    res = await run_scenario(tiny, router_url=router, engine_urls=sims.urls, model=MODEL, after_arm=after_arm)
    assert [h[0] for h in heard] == [tiny.baseline.label, tiny.infctl.label]
    assert [h[1] for h in heard] == [res.baseline.summary.completed, res.infctl.summary.completed] == [6, 6]
    # Every request of the arm had its first token on an engine, and none of the next arm's had started.
    assert [h[2] for h in heard] == [6, 12]


async def test_engines_unable_to_reset_their_caches_fail_first(start_sim, start_router) -> None:
    # vLLM outside dev mode answers 404 to /reset_prefix_cache: the run stops before its first arm sends
    # anything, saying how to start the engines, rather than comparing an arm on the other's warm cache.
    sims = await start_sim(instances=2, time_scale=0.02)
    router = await start_router([Backend(id=u, url=u) for u in sims.urls])
    tiny = dataclasses.replace(prefix_scenario(2), load=LoadPlan(stages=[Stage(rate=40, num_requests=4)]))
    heard: list[str] = []
    with pytest.raises(EngineError, match="/reset_prefix_cache answered 404") as err:
        await run_scenario(
            tiny, router_url=router, engine_urls=sims.urls, model=MODEL, engine="vllm", progress=heard.append
        )
    assert err.value.hint is not None and "VLLM_SERVER_DEV_MODE=1" in err.value.hint
    assert heard == [f"{tiny.name}: {tiny.baseline.label}"]
    async with httpx.AsyncClient(trust_env=False) as client:
        texts = [(await client.get(f"{u}/metrics")).text for u in sims.urls]
    family = f"{TIME_TO_FIRST_TOKEN}_count"
    assert sum(value(parse_metrics(t, {family}), family) for t in texts) == 0
