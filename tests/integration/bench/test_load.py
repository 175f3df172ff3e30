"""The load generator: warm-up, stages and ramps, headers and extra body, Ctrl-C, files checked first."""

from __future__ import annotations

import asyncio
import itertools
import statistics
from pathlib import Path

import pytest
from benchkit import StartFake, loop_lag

from infctl.bench import (
    SLO,
    BenchConfig,
    LengthDist,
    LoadPlan,
    MultiTurnSpec,
    RandomSpec,
    Stage,
    TraceSpec,
    run_benchmark,
)
from infctl.bench.sweep import find_max_rate, sweep
from infctl.errors import ConfigError

SMALL = RandomSpec(input=LengthDist(mean=8), output=LengthDist(mean=2))


async def test_warmup_is_excluded_and_headers_and_body_extras_are_sent(start_fake: StartFake) -> None:
    fake = await start_fake(ttft_s=0.001, itl_s=0.001)
    cfg = BenchConfig(
        url=fake.url,
        workload=SMALL,
        headers={"X-Team": "infra"},
        extra_body={"ignore_eos": True, "max_tokens": 3},
        load=LoadPlan(stages=[Stage(rate=200, num_requests=5)], warmup=3),
    )
    result = await run_benchmark(cfg)
    assert len(fake.bodies) == 8 and result.summary.total == 5
    assert result.metadata.model == "fake-model"  # resolved from /v1/models
    assert all(b["ignore_eos"] is True and b["max_tokens"] == 3 and b["stream"] for b in fake.bodies)
    assert all(h.get("X-Team") == "infra" for h in fake.headers)
    assert [r.index for r in result.requests] == list(range(5))


async def test_stages_ramp_and_achieved_rates(start_fake: StartFake) -> None:
    fake = await start_fake(ttft_s=0.002, itl_s=0.001)
    stages = [
        Stage(rate=40, duration_s=1.0),
        Stage(rate=40, rate_end=120, duration_s=1.0),
        Stage(concurrency=4, num_requests=20),
    ]
    cfg = BenchConfig(url=fake.url, workload=SMALL, load=LoadPlan(stages=stages, arrivals="constant"))
    async with loop_lag() as lags:
        result = await run_benchmark(cfg)
    a, b, c = result.stages
    assert a.summary.total == 40 and a.achieved_rate == pytest.approx(40, rel=0.1)
    assert b.summary.total == pytest.approx(80, abs=2) and b.requested_rate == 80
    assert c.summary.total == 20 and result.summary.failed == 0
    # The generator's own lag is under 5 ms at p50, beyond how late any timer of this loop woke meanwhile
    # (the host's load: the bare 5 ms bound failed at 10 ms with two CPU hogs running; p99 and the limited
    # flag depend on the host alone).
    assert result.client.send_lag["p50"] < 0.005 + statistics.median(lags), statistics.median(lags)
    d = result.to_dict()
    assert [s["requests"]["total"] for s in d["stages"]] == [a.summary.total, b.summary.total, 20]


async def test_stop_keeps_partial_results(start_fake: StartFake) -> None:
    fake = await start_fake(ttft_s=0.01, itl_s=0.01)
    stop = asyncio.Event()
    cfg = BenchConfig(url=fake.url, workload=SMALL, load=LoadPlan(stages=[Stage(rate=50, duration_s=30)]))
    asyncio.get_running_loop().call_later(0.5, stop.set)
    result = await run_benchmark(cfg, stop=stop)
    assert result.metadata.interrupted and 5 < result.summary.total < 40
    assert result.summary.failed == 0  # requests cut short are dropped, not counted as errors
    assert any("interrupted" in w for w in result.warnings)


async def test_bad_trace_line_fails_before_any_request(start_fake: StartFake, tmp_path: Path) -> None:
    fake = await start_fake()
    trace = tmp_path / "t.jsonl"
    trace.write_text(
        '{"timestamp": 0, "input_length": 8, "output_length": 2, "hash_ids": [1]}\n{"timestamp": 1}\n'
    )
    cfg = BenchConfig(url=fake.url, workload=TraceSpec(path=trace), load=LoadPlan(stages=[Stage()]))
    with pytest.raises(ConfigError, match=f"{trace}:2: input_length"):
        await run_benchmark(cfg)
    assert fake.bodies == []


async def test_multi_turn_waits_for_the_previous_turn(start_fake: StartFake) -> None:
    fake = await start_fake(ttft_s=0.02, itl_s=0.005)
    spec = MultiTurnSpec(conversations=2, turns=3, input=LengthDist(mean=5), output=LengthDist(mean=2))
    cfg = BenchConfig(
        url=fake.url, workload=spec, load=LoadPlan(stages=[Stage(rate=float("inf"), num_requests=6)])
    )
    result = await run_benchmark(cfg)
    for sid in (0, 1):
        turns = [r for r in result.requests if r.session == sid]
        assert len(turns) == 3
        assert all(b.sent_s >= a.end_s for a, b in itertools.pairwise(turns))


async def test_sweep_and_find_max(start_fake: StartFake) -> None:
    fake = await start_fake(ttft_s=0.002, itl_s=0.001, slow_when_busy_s=0.02)
    cfg = BenchConfig(
        url=fake.url,
        workload=SMALL,
        slo=SLO(ttft_s=0.015),
        load=LoadPlan(stages=[Stage(rate=1, num_requests=12)], arrivals="constant"),
    )
    swept = await sweep(cfg, [20, 200])
    assert [r.client.requested_rate for r in swept.runs] == [20, 200]
    assert swept.to_dict()["runs"][0]["schema_version"] == 1
    found = await find_max_rate(cfg, start=25, attainment=0.9, precision=0.2, max_probes=8)
    assert found.best_rate is not None and 25 / 64 <= found.best_rate < 1000
    assert any(not p.passed for p in found.probes) and found.best is not None


async def test_trace_replay_follows_timestamps_across_stages(start_fake: StartFake, tmp_path: Path) -> None:
    fake = await start_fake(ttft_s=0.001, itl_s=0.001)
    trace = tmp_path / "t.jsonl"
    rows = [
        f'{{"timestamp": {ms}, "input_length": 8, "output_length": 2, "hash_ids": [{i}]}}'
        for i, ms in enumerate([0, 100, 200, 300, 1000, 1100])
    ]
    trace.write_text("\n".join(rows) + "\n")
    spec = TraceSpec(path=trace, block_size=8, time_compression=2)
    cfg = BenchConfig(url=fake.url, workload=spec, load=LoadPlan(stages=[Stage(duration_s=0.3), Stage()]))
    async with loop_lag() as lags:
        result = await run_benchmark(cfg)
    sends = [r.scheduled_s - result.requests[0].scheduled_s for r in result.requests]
    assert [r.stage for r in result.requests] == [0, 0, 0, 0, 1, 1]  # 150 ms < 0.3 s; 500 ms is not
    assert sends[:4] == pytest.approx([0.0, 0.05, 0.1, 0.15], abs=0.005)
    assert sends[5] - sends[4] == pytest.approx(0.05, abs=0.005)  # the next stage keeps the trace's pace
    # Under 5 ms beyond how late this loop's timers woke meanwhile (the host's load), as in the ramp test.
    assert result.client.send_lag["p50"] < 0.005 + statistics.median(lags), statistics.median(lags)
