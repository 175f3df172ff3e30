"""``request_overhead_us``: the API server's per-request work delays a request's entry into the engine core
(live driver and cluster simulator alike) without stalling the steps of requests already running; and the
core prices each prefill chunk apart for profiles with a per-chunk term."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from infctl.bench.config import LoadPlan, Stage
from infctl.bench.workloads import LengthDist, RandomSpec
from infctl.sim.calib_profile import CalibratedProfile, write_profile_file
from infctl.sim.cluster import SimConfig, simulate
from infctl.sim.profiles import TINY_CPU, PrefillChunks, SimProfile
from infctl.sim.scheduler import EngineCore
from infctl.sim.types import SimRequest
from infctl.sim.virtual import run_until_idle
from infctl.tokens import synth_words, token_ids

OVERHEAD_US = 40_000.0


def prompt(n: int, salt: int) -> list[int]:
    return token_ids(synth_words(n, salt=salt))


def _with(profile: SimProfile, **fields: Any) -> CalibratedProfile:
    return CalibratedProfile(**{**dataclasses.asdict(profile), **fields})


def _cluster_cfg(profile: SimProfile, rate: float) -> SimConfig:
    return SimConfig(
        workload=RandomSpec(input=LengthDist(mean=200), output=LengthDist(mean=20)),
        load=LoadPlan(stages=[Stage(rate=rate, num_requests=40)]),
        engines=1,
        profile=profile,
        policy="round_robin",
    )


def test_cluster_sim_delays_each_request_by_the_overhead_and_nothing_else() -> None:
    base = _with(TINY_CPU, num_gpu_blocks=4096)
    late = dataclasses.replace(base, request_overhead_us=OVERHEAD_US, request_overhead_us_per_ktok=5000.0)
    # Requests one second apart never meet: each TTFT grows by exactly the overhead, token gaps do not move.
    a = sorted(simulate(_cluster_cfg(base, rate=1.0)).bench.requests, key=lambda r: r.index)
    b = sorted(simulate(_cluster_cfg(late, rate=1.0)).bench.requests, key=lambda r: r.index)
    assert len(a) == len(b) == 40 and all(r.error is None for r in a + b)
    for x, y in zip(a, b, strict=True):
        delay = (OVERHEAD_US + 5000.0 * y.input_tokens / 1e3) * 1e-6
        assert y.chunk_times[0] - y.sent_s == pytest.approx(x.chunk_times[0] - x.sent_s + delay)
        gaps_x = [t1 - t0 for t0, t1 in zip(x.chunk_times, x.chunk_times[1:], strict=False)]
        gaps_y = [t1 - t0 for t0, t1 in zip(y.chunk_times, y.chunk_times[1:], strict=False)]
        assert gaps_y == pytest.approx(gaps_x)


def test_cluster_sim_overhead_never_lengthens_a_step() -> None:
    """Under load the overhead is spent beside the engine: every step costs what its work costs."""
    late = _with(TINY_CPU, num_gpu_blocks=4096, request_overhead_us=OVERHEAD_US)
    r = simulate(_cluster_cfg(late, rate=40.0))
    assert r.bench.summary.completed == 40
    # The fastest token gap is a pure decode step of one sequence or more: never less than the step model's.
    gaps = [
        t1 - t0
        for rec in r.bench.requests
        for t0, t1 in zip(rec.chunk_times, rec.chunk_times[1:], strict=False)
    ]
    assert min(gaps) >= late.step_time(0, 1, 0) - 1e-12
    assert min(gaps) < late.step_time(0, 1, 0) + OVERHEAD_US * 1e-6


class _Recording(CalibratedProfile):
    """Records the chunks each step is priced with."""

    seen: list[PrefillChunks | None]

    def step_time(
        self,
        prefill_tokens: int,
        decode_seqs: int,
        decode_context_tokens: int,
        chunks: PrefillChunks | None = None,
    ) -> float:
        self.seen.append(None if chunks is None else list(chunks))
        return super().step_time(prefill_tokens, decode_seqs, decode_context_tokens, chunks)


def test_core_passes_each_requests_chunk_and_prefix() -> None:
    p = _Recording(
        **{**dataclasses.asdict(TINY_CPU), "num_gpu_blocks": 4096, "prefill_quad_us_per_ktok2": 1000.0}
    )
    object.__setattr__(p, "seen", [])
    core = EngineCore(p)
    reqs = [
        SimRequest("a", prompt(3000, 1), 2, 0.0),
        SimRequest("b", prompt(500, 2), 2, 0.0),
    ]
    run_until_idle(core, reqs)
    budget = TINY_CPU.max_num_batched_tokens  # 2048
    # a's first chunk fills the step; then a's rest (after its 2048-token prefix) shares a step with b.
    assert p.seen[0] == [(budget, 0)]
    assert p.seen[1] == [(3000 - budget, budget), (500, 0)]
    # Decode-only steps carry no chunks.
    assert p.seen[-1] == []


def test_stock_profiles_get_no_chunks() -> None:
    seen: list[PrefillChunks | None] = []

    class Stock(SimProfile):
        def step_time(self, p: int, d: int, c: int, chunks: PrefillChunks | None = None) -> float:
            seen.append(chunks)
            return super().step_time(p, d, c, chunks)

    core = EngineCore(Stock(**dataclasses.asdict(TINY_CPU)))
    run_until_idle(core, [SimRequest("a", prompt(100, 1), 3, 0.0)])
    assert seen and all(c is None for c in seen)


async def test_live_driver_holds_the_request_back_and_aborts_it_cleanly(
    start_sim: Any, scrape: Any, tmp_path: Path
) -> None:
    path = tmp_path / "late.json"
    write_profile_file(path, _with(TINY_CPU, request_overhead_us=1_000_000.0))  # 1 simulated second
    cluster = await start_sim(profile=str(path), time_scale=0.01)
    driver = cluster.instances[0].driver
    track = driver.submit(SimRequest("x", prompt(64, 3), 4, cluster.clock.now()))
    assert not driver.core.has_work()  # still with the "API server"
    driver.abort("x")
    assert track.done and track.finish_reason == "abort"
    await asyncio.sleep(0.03)  # past the delay (10 ms of wall time): the request never reached the core
    assert not driver.core.has_work() and driver.core.stats().prompt_tokens == 0

    # A request the core refuses once its delay is over (the routes check lengths first) ends, never hangs.
    refused = driver.submit(SimRequest("z", prompt(64, 5), TINY_CPU.max_model_len, cluster.clock.now()))
    while not refused.done:
        await asyncio.wait_for(refused.queue.get(), 5)
    assert refused.finish_reason == "abort"

    ok = driver.submit(SimRequest("y", prompt(64, 4), 2, cluster.clock.now()))
    while not ok.done:
        await asyncio.wait_for(ok.queue.get(), 5)
    assert ok.finish_reason == "length"
    assert ok.first_token_at is not None and ok.scheduled_at is not None
    # Tokens never come before the delay and the prefill step; the engine's queue time leaves the delay out.
    assert ok.first_token_at - ok.request.arrival >= 1.0 + TINY_CPU.step_time(64, 0, 0) - 1e-9
    samples = await scrape(cluster.urls[0])
    queue = next(v for k, v in samples.items() if k.startswith("vllm:request_queue_time_seconds_sum"))
    # Exactly its wait at the core (whatever event-loop lag this machine added to it: at time scale 0.01,
    # 5 ms of lag is half a simulated second), never the delay's second too.
    assert queue == pytest.approx(ok.scheduled_at - ok.request.arrival - 1.0)
