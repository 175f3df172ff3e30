"""Against the simulated engine: prompts have exactly the intended token counts, and the server-side view
(prefix-cache hits, preemptions, queue peaks) is read through the engine adapters."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from infctl.bench import (
    BenchConfig,
    LengthDist,
    LoadPlan,
    MixComponent,
    MixtureSpec,
    MultiTurnSpec,
    RandomSpec,
    SharedPrefixSpec,
    Stage,
    TraceSpec,
    run_benchmark,
)
from infctl.bench.workloads import build_workload
from infctl.bench.workloads.mooncake import sample_trace

TRACE = sample_trace()  # the public Mooncake trace shipped in data/
L = LengthDist


def small_trace(tmp_path: Path) -> Path:
    p = tmp_path / "trace.jsonl"
    p.write_text("".join(itertools.islice(TRACE.open(), 30)))
    return p


WORKLOADS = {
    "random": lambda _: RandomSpec(input=L.parse("uniform:20,200"), output=L(mean=4)),
    "mixture": lambda _: MixtureSpec(
        components=[
            MixComponent(weight=1, input=L(mean=30), output=L(mean=3)),
            MixComponent(weight=1, input=L(mean=300), output=L(mean=5)),
        ]
    ),
    "shared-prefix": lambda _: SharedPrefixSpec(
        groups=3, prefix_tokens=64, input=L.parse("normal:40,10"), output=L(mean=3)
    ),
    "multi-turn": lambda _: MultiTurnSpec(
        conversations=3, turns=3, system_tokens=20, input=L(mean=15), output=L(mean=6)
    ),
    "trace": lambda tmp: TraceSpec(path=small_trace(tmp), input_scale=1 / 32, time_compression=100),
}


@pytest.mark.parametrize("api", ["completions", "chat"])
@pytest.mark.parametrize("kind", list(WORKLOADS))
async def test_usage_matches_the_workloads_token_counts(
    start_sim, tmp_path: Path, kind: str, api: str
) -> None:  # type: ignore[no-untyped-def]
    cluster = await start_sim()
    spec = WORKLOADS[kind](tmp_path)
    stage = Stage(num_requests=12) if kind == "trace" else Stage(rate=200, num_requests=12)
    cfg = BenchConfig(url=cluster.urls[0], api=api, workload=spec, seed=3, load=LoadPlan(stages=[stage]))  # type: ignore[arg-type]
    result = await run_benchmark(cfg)
    assert result.summary.failed == 0, result.summary.error_examples
    expected = list(itertools.islice(build_workload(spec, api, 3).requests(), 12))  # type: ignore[arg-type]
    assert all(r.output_from_usage for r in result.requests)
    assert [r.input_tokens for r in result.requests] == [e.input_tokens for e in expected]
    assert [r.output_tokens for r in result.requests] == [e.max_tokens for e in expected]


async def test_server_view_prefix_hits_and_queue(start_sim) -> None:  # type: ignore[no-untyped-def]
    cluster = await start_sim(instances=2)
    # 48 output tokens: long enough for the 50 ms sampler to see requests running
    spec = SharedPrefixSpec(groups=2, prefix_tokens=256, input=L(mean=32), output=L(mean=48))
    load = LoadPlan(stages=[Stage(rate=100, num_requests=40)], arrivals="constant")
    cfg = BenchConfig(
        url=cluster.urls[0], workload=spec, engine_urls=cluster.urls, sample_interval_s=0.05, load=load
    )
    result = await run_benchmark(cfg)
    server = result.server
    assert server is not None and [e.engine for e in server.engines] == ["vllm", "vllm"]
    busy, idle = server.engines
    assert busy.prompt_tokens == result.summary.total_input_tokens and idle.prompt_tokens == 0
    assert server.hit_rate == pytest.approx(result.summary.cached_fraction, abs=0.02)
    assert (server.hit_rate or 0) > 0.7 and server.samples > 3 and busy.running_peak >= 1
    d = result.to_dict()["server"]
    assert d["prefix_cache_hit_rate"] == pytest.approx(server.hit_rate) and d["engines"][0]["queue_peak"] >= 0


async def test_preemptions_show_up(start_sim) -> None:  # type: ignore[no-untyped-def]
    cluster = await start_sim(num_gpu_blocks=40, block_size=16)
    spec = RandomSpec(input=L(mean=200), output=L(mean=150))
    cfg = BenchConfig(
        url=cluster.urls[0],
        workload=spec,
        engine_urls=cluster.urls,
        engine="vllm",
        load=LoadPlan(stages=[Stage(rate=float("inf"), num_requests=8)]),
    )
    result = await run_benchmark(cfg)
    assert result.server is not None and result.server.preemptions > 0


async def test_sglang_engine_is_detected(start_sim) -> None:  # type: ignore[no-untyped-def]
    cluster = await start_sim(personality="sglang")
    cfg = BenchConfig(
        url=cluster.urls[0],
        engine_urls=cluster.urls,
        workload=RandomSpec(input=L(mean=20)),
        load=LoadPlan(stages=[Stage(concurrency=2, num_requests=4)]),
    )
    result = await run_benchmark(cfg)
    assert result.server is not None and result.server.engines[0].engine == "sglang"
    assert result.server.engines[0].prompt_tokens == result.summary.total_input_tokens
