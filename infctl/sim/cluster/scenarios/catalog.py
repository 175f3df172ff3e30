"""The seed's four comparisons, sized by a :class:`ScenarioSize`, on DeepSeek-V3 and Kimi K2 engines.

Each builder returns a pure :class:`~infctl.sim.cluster.scenarios.model.SimScenario`; nothing runs here.
Arms use the router's own presets (``random``, ``round_robin``, ``least_load``, ``cache_aware``) and bucket
config, the autoscaler's own :class:`~infctl.autoscaler.settings.PolicyConfig`, and the simulated engine's
own :class:`~infctl.sim.offload.OffloadTier`: nothing is reimplemented.

Loads are set from the profile's prefill capacity (:func:`prefill_rate`) so a scenario stays in the same
regime on any profile: latency stages run open loop at about 60% of the baseline's capacity, throughput
stages run closed loop with more requests in flight than the engines can batch quickly.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from infctl.bench.config import LoadPlan, Stage
from infctl.bench.scenarios import LONG_MEAN, SHORT_MAX_TOKENS, SHORT_MEAN, bucketing_mix
from infctl.bench.workloads import (
    LengthDist,
    SharedPrefixSpec,
    TraceSpec,
    WorkloadSpec,
)
from infctl.bench.workloads.mooncake import sample_trace
from infctl.errors import ConfigError
from infctl.sim.cluster.config import SimConfig, variant_scrape_interval
from infctl.sim.cluster.scenarios import measures as m
from infctl.sim.cluster.scenarios.model import Measure, SimArm, SimScenario
from infctl.sim.cluster.scenarios.pools import Bucket, bucket_demand, planned_pools, prefill_rate
from infctl.sim.profiles import DEEPSEEK_V3_H200_DECODE, KIMI_K2_H200, SimProfile

DEEPSEEK_V3_H200 = DEEPSEEK_V3_H200_DECODE.with_overrides(
    name="deepseek-v3-h200",
    description="DeepSeek-V3 on one 8xH200 node, aggregated: the decode node's step model with the prefill "
    "node's 16k-token chunks (~70k prompt tok/s)",
    max_num_batched_tokens=16_384,
)
"""DeepSeek-V3 serving whole requests (prefill and decode on one engine), as the scenarios need."""
GPUS = {DEEPSEEK_V3_H200.name: 8, KIMI_K2_H200.name: 16}
"""GPUs per engine of the scenarios' profiles (for GPU-hours); other profiles count 1."""
MOONCAKE_REQUESTS = 3993
TRACE_PROMPT_TOKENS_PER_S = 60_000
"""Prompt tokens per second the Mooncake trace sends at its own timestamps (3,993 x 15.3k in 1,022 s)."""
MAX_OUTPUT_TOKENS = 2048
"""Trace outputs are cut here, prompts at the profile's context less this."""


UTIL = 0.6
"""Open-loop stages load the baseline to this share of its prefill capacity."""


@dataclass(frozen=True)
class ScenarioSize:
    """How big to run the scenarios (``infctl simulate compare`` flags)."""

    engines: int = 8
    """Engines of the routing comparisons; half of them for autoscaling (its static fleet), an eighth for
    the KV tier."""
    requests: int = 2000
    """Requests per arm (a trace: its first ones, at most 3,993; the diurnal day is sized to send these)."""
    seed: int = 0
    """Seeds the generated workloads and their arrivals. A trace replayed at its own timestamps (pd,
    prefix-mooncake, kv-tier) has neither: there it picks the router's scrape interval
    (:func:`~infctl.sim.cluster.config.variant_scrape_interval`, 100 ms at seed 0), the timing noise that
    moves a live run's decisions."""
    profile: SimProfile | None = None
    """None: the scenarios' own (DeepSeek-V3, an 8xH200 node per engine); e.g. Kimi K2 (16 GPUs each)."""
    trace: Path | None = None
    """Mooncake-format trace of the trace-driven scenarios; None: the public one shipped with infctl."""
    lead_in_h: int = 0
    """Autoscaling days: hours of the evening before that each day starts with, not measured, so the fleet
    and the autoscalers meet midnight as they would in life (0: a cold fleet at midnight)."""

    def __post_init__(self) -> None:
        if not 0 <= self.lead_in_h <= 12:
            raise ConfigError(f"lead-in {self.lead_in_h} h: expected 0 to 12 hours", hint="e.g. --lead-in 2")
        if self.engines < 2:
            raise ConfigError("the comparisons need at least 2 engines", hint="e.g. --engines 8")
        if self.requests < 20:
            raise ConfigError(
                "the comparisons need at least 20 requests per arm", hint="e.g. --requests 2000"
            )


def paced_rate(engines: int, profile: SimProfile, tokens: float) -> float:
    """How many times a second ``engines`` can be sent ``tokens`` prompt tokens to prefill and stay at
    ``UTIL`` of their prefill capacity: a request rate, or a trace's compression when ``tokens`` is what the
    trace sends in one second."""
    return UTIL * engines * prefill_rate(profile) / tokens


def base_config(size: ScenarioSize, profile: SimProfile, **fields: Any) -> SimConfig:
    """A scenario's config on ``size.profile`` (else ``profile``), with its GPUs per engine and seed."""
    p = size.profile or profile
    return SimConfig(profile=p, gpus_per_engine=GPUS.get(p.name, 1), seed=size.seed, **fields)


def half_paced(requests: int, concurrency: int, rate: float | None = None) -> LoadPlan:
    """The first half of ``requests`` paced at ``rate`` requests/s (None: a trace's own timestamps, as
    compressed), for latencies; the rest in a closed loop of ``concurrency``, for throughput."""
    half = max(10, requests // 2)
    return LoadPlan(
        stages=[
            Stage(rate=rate, num_requests=half),
            Stage(concurrency=concurrency, num_requests=requests - half),
        ]
    )


def half_paced_on(
    base: SimConfig, size: ScenarioSize, workload: WorkloadSpec, tokens: float, *, per_engine: int
) -> tuple[SimConfig, float]:
    """``base`` sending ``workload`` :func:`half_paced`: paced at the rate that keeps ``size.engines`` at
    ``UTIL`` of their prefill capacity when each request brings ``tokens`` uncached prompt tokens, then in
    a closed loop of ``per_engine`` requests per engine. Returns the config and that rate (requests/s)."""
    rate = paced_rate(size.engines, base.profile, tokens)
    load = half_paced(size.requests, per_engine * size.engines, rate)
    return replace(base, workload=workload, load=load), rate


SAT_TPUT = Measure("output tok/s at saturation", m.output_throughput(m.SATURATED), "tok/s", "higher")


def bucketing(size: ScenarioSize) -> SimScenario:
    """90% short chats, 10% long documents: one least-load pool vs length buckets with their own engines.

    The same engines either way; the autoscaler's planner divides them between the buckets by each bucket's
    demand, measured on the traffic (prompt and output tokens per second), over what one engine prefills and
    decodes (:mod:`~infctl.sim.cluster.scenarios.pools`). What changes is that short prompts never queue
    behind a long prefill, and neither pool is starved."""
    mean_prompt = 0.9 * SHORT_MEAN + 0.1 * LONG_MEAN
    buckets = [
        {"name": "short", "max_tokens": SHORT_MAX_TOKENS, "pools": ["short"]},
        {"name": "long", "pools": ["long"]},
    ]
    workload = bucketing_mix(short_output=128, long_output=64)
    base = base_config(size, DEEPSEEK_V3_H200, engines=size.engines)
    base, rate = half_paced_on(base, size, workload, mean_prompt, per_engine=32)
    demand = bucket_demand(
        workload,
        (size.requests, size.seed),
        [Bucket("short", SHORT_MAX_TOKENS), Bucket("long", None)],
        rate,
        base.profile,
    )
    pools, plan = planned_pools(demand, size.engines)
    counts = plan.counts()
    loads = ", ".join(f"{d.name} {d.load:.1f}" for d in demand)
    return SimScenario(
        name="bucketing",
        title=f"length buckets vs one pool: {size.engines} x {base.profile.name}, 90% short / 10% long "
        "prompts",
        base=base,
        arms=[
            SimArm("one pool", {"policy": "least_load"}),
            SimArm(
                f"buckets ({counts['short']} short + {counts['long']} long)",
                {"policy": {"preset": "least_load", "buckets": buckets}},
                pools,
            ),
        ],
        measures=[
            Measure("short TTFT p50", m.short_ttft("p50", m.PACED), "ms", "lower"),
            Measure("short TTFT p99", m.short_ttft("p99", m.PACED), "ms", "lower"),
            Measure("TTFT p99 (all)", m.ttft("p99", m.PACED), "ms", "lower"),
            SAT_TPUT,
        ],
        headline="short TTFT p99",
        seed_says={"short TTFT p99": "-91%", SAT_TPUT.name: "+124%"},
        notes=f"latencies at {rate:.1f} req/s (open loop, ~60% of prefill capacity); throughput in a closed "
        f"loop of {32 * size.engines} requests; pools by the planner from the measured demand (engines' "
        f"worth of work at {rate:.1f} req/s: {loads})",
    )


PREFIX_MEASURES = [
    Measure("prefix-cache hit rate", m.engine_hit_rate, "pct", "higher"),
    Measure("TTFT p50", m.ttft("p50", m.PACED), "ms", "lower"),
    Measure("TTFT p99", m.ttft("p99", m.PACED), "ms", "lower"),
    SAT_TPUT,
]
PREFIX_SEED = {"prefix-cache hit rate": "60% -> 90%", "TTFT p50": "-29%", SAT_TPUT.name: "+30%"}
ROUTING_ARMS = [
    SimArm("random", {"policy": "random"}),
    SimArm("infctl cache_aware", {"policy": "cache_aware"}),
    SimArm("round robin", {"policy": "round_robin"}),
]


def prefix_shared(size: ScenarioSize) -> SimScenario:
    """Long shared prefixes (documents, agent prompts: 32k tokens, less on a small engine) whose working set
    is twice one engine's HBM."""
    base = base_config(size, DEEPSEEK_V3_H200, engines=size.engines)
    p = base.profile
    hbm = p.num_gpu_blocks * p.block_size
    prefix = min(32_768, hbm // 8 // p.block_size * p.block_size)
    groups = max(4, round(2 * hbm / prefix))
    workload = SharedPrefixSpec(
        groups=groups, prefix_tokens=prefix, zipf=0.6, input=LengthDist(mean=256), output=LengthDist(mean=128)
    )
    # Random routing finds about a third of each prompt cached: size the paced rate on that.
    base, rate = half_paced_on(base, size, workload, 0.67 * (prefix + 256), per_engine=16)
    return SimScenario(
        name="prefix",
        title=f"prefix-aware vs random routing: {size.engines} x {p.name}, {groups} shared {prefix // 1024}k "
        "prefixes",
        base=base,
        arms=ROUTING_ARMS,
        measures=PREFIX_MEASURES,
        headline="prefix-cache hit rate",
        seed_says=PREFIX_SEED,
        notes=f"latencies at {rate:.1f} req/s (open loop); throughput in a closed loop of "
        f"{16 * size.engines}",
    )


def trace_spec(size: ScenarioSize, compression: float) -> tuple[TraceSpec, int]:
    trace = size.trace or sample_trace()
    if not trace.is_file():
        raise ConfigError(
            f"the Mooncake trace {trace} is missing", hint="pass --trace FILE (Mooncake JSONL format)"
        )
    # A few Mooncake prompts exceed a 128k context: cut them, as --max-input-tokens would.
    longest = (size.profile or DEEPSEEK_V3_H200).max_model_len - MAX_OUTPUT_TOKENS
    spec = TraceSpec(
        path=trace,
        time_compression=compression,
        max_input_tokens=longest,
        max_output_tokens=MAX_OUTPUT_TOKENS,
    )
    return spec, min(size.requests, MOONCAKE_REQUESTS)


def on_trace(
    size: ScenarioSize, base: SimConfig, *, prefill_engines: int, computed: float
) -> tuple[SimConfig, float, int]:
    """``base`` replaying the Mooncake trace, its timestamps compressed so that ``prefill_engines`` run at
    ``UTIL`` of their prefill capacity when a ``computed`` share of each prompt is prefilled (the rest
    cached); half paced, half in a closed loop of 16 per engine; the router scraping at the seed's
    interval (``ScenarioSize.seed``). Also the compression and the requests."""
    compression = paced_rate(prefill_engines, base.profile, computed * TRACE_PROMPT_TOKENS_PER_S)
    trace, n = trace_spec(size, compression)
    load = half_paced(n, 16 * base.engines)
    scrape = variant_scrape_interval(size.seed)
    return replace(base, workload=trace, load=load, scrape_interval_s=scrape), compression, n


def seed_note(size: ScenarioSize) -> str:
    """What the seed changed in a trace replay, for a scenario's notes."""
    ms = variant_scrape_interval(size.seed) * 1000
    return (
        f"; the trace replays exactly, seed {size.seed} sets the router's scrape interval to {ms:.0f} ms "
        "(arms reading no engine signals replay the same)"
    )


def prefix_mooncake(size: ScenarioSize) -> SimScenario:
    """The Mooncake trace (mean prompt 15k tokens, 64% reusable), compressed to load the fleet."""
    base = base_config(size, DEEPSEEK_V3_H200, engines=size.engines)
    # The trace sends ~60k prompt tokens/s: compress it to ~60% of the fleet's prefill capacity at a
    # 30% hit rate.
    base, compression, n = on_trace(size, base, prefill_engines=size.engines, computed=0.7)
    return SimScenario(
        name="prefix-mooncake",
        title=f"prefix-aware vs random routing: {size.engines} x {base.profile.name}, Mooncake trace x"
        f"{compression:.1f}",
        base=base,
        arms=ROUTING_ARMS,
        measures=PREFIX_MEASURES,
        headline="prefix-cache hit rate",
        seed_says=PREFIX_SEED,
        notes=f"first {n} trace requests: half at the trace's timestamps compressed x{compression:.1f}, "
        f"half in a closed loop of {16 * size.engines}{seed_note(size)}",
    )
