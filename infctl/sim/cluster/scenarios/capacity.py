"""The two capacity comparisons: autoscaling vs static provisioning, and a second KV tier vs HBM only.

Autoscaling: one diurnal day (:mod:`~infctl.sim.cluster.scenarios.diurnal`) of Mooncake requests,
compressed so the arm sends ``requests``; the static fleet is half of ``engines`` (sized for the peak: ~60%
of its prefill capacity there), the autoscaled one runs the autoscaler's unchanged policy between 1 and
that. Its windows, cooldowns,
decision interval and engine startup shrink with the day, but never below ``MIN_TIME_SCALE`` of their real
length (a 1 s decision interval), so a strongly compressed day is harder on the autoscaler than life is.

KV tier: the Mooncake trace (22M distinct prompt tokens) on an eighth of the engines (whose HBM holds a
fifth of it with DeepSeek-V3), with no tier, a host-DRAM tier and a slower shared pool
(``infctl.sim.offload.OffloadTier``).
"""

from __future__ import annotations

import math
from dataclasses import replace

from infctl.autoscaler.settings import PolicyConfig, UnitConfig
from infctl.bench.slo import SLO
from infctl.sim.cluster.config import AutoscaleSettings
from infctl.sim.cluster.scenarios import measures as m
from infctl.sim.cluster.scenarios.catalog import (
    DEEPSEEK_V3_H200,
    SAT_TPUT,
    ScenarioSize,
    base_config,
    on_trace,
    paced_rate,
    seed_note,
    trace_spec,
)
from infctl.sim.cluster.scenarios.diurnal import diurnal_plan, mean_level, shape
from infctl.sim.cluster.scenarios.model import Measure, SimArm, SimScenario
from infctl.sim.offload import OffloadTier

DAY_SHAPE = "consumer"
TTFT_SLO_S = 2.0
"""The day's objective: TTFT p99 under 2 s (a 15k-token Mooncake prompt prefills in ~0.25 s)."""
MIN_TIME_SCALE = 1 / 15
REAL_INTERVAL_S, REAL_STARTUP_S = 15.0, 90.0
"""The autoscaler daemon's decision interval and an engine's startup (weights, warm-up) in life."""
TRACE_PROMPT_TOKENS = 15_300
"""Mean prompt of the Mooncake trace."""


def autoscaling(size: ScenarioSize) -> SimScenario:
    """A consumer-shaped day of Mooncake requests (sent at the day's rate, not the trace's timestamps):
    a static fleet of ``engines // 2`` for the peak vs the autoscaler between 1 and that."""
    engines = max(2, size.engines // 2)
    base = base_config(size, DEEPSEEK_V3_H200, engines=engines)
    peak = paced_rate(engines, base.profile, TRACE_PROMPT_TOKENS)
    trace, n = trace_spec(size, 1.0)
    day_s = n / (peak * mean_level(DAY_SHAPE))
    scale = max(day_s / 86_400, MIN_TIME_SCALE)
    policy = PolicyConfig(
        units=(UnitConfig("both", min=1, max=engines),),
        ttft_slo_s=TTFT_SLO_S,
        queue_up=2.0,
        queue_down=0.5,
    ).scaled(scale)
    start = max(1, math.ceil(engines * shape(DAY_SHAPE)[0]))
    auto = AutoscaleSettings(
        policy=policy, interval_s=REAL_INTERVAL_S * scale, startup_s=REAL_STARTUP_S * scale
    )
    base = replace(
        base,
        workload=trace,
        load=diurnal_plan(DAY_SHAPE, peak, day_s),
        slo=SLO(ttft_s=TTFT_SLO_S),
    )
    return SimScenario(
        name="autoscaling",
        title=f"autoscaling vs static for the peak: {base.profile.name}, a {DAY_SHAPE} day in "
        f"{day_s / 60:.0f} min",
        base=base,
        arms=[
            SimArm(f"static {engines}"),
            SimArm(f"autoscaled 1-{engines}", {"autoscale": auto, "engines": start}),
        ],
        measures=[
            Measure("GPU-hours", m.gpu_hours, "h", "lower"),
            Measure(f"SLO attainment (TTFT <= {TTFT_SLO_S:g} s)", m.slo_attainment, "pct", "higher"),
            Measure("TTFT p50", m.ttft("p50"), "ms", "lower"),
            Measure("TTFT p99", m.ttft("p99"), "ms", "lower"),
            Measure("peak engines", m.peak_engines, "count", "lower"),
        ],
        headline="GPU-hours",
        seed_says={"GPU-hours": "-26%"},
        notes=f"peak {peak:.1f} req/s; autoscaler timings x{scale:.3f} of life (interval "
        f"{auto.interval_s:.1f} s, startup {auto.startup_s:.1f} s, scale-down window "
        f"{policy.down_window_s:.0f} s); GPU-hours at {base.gpus_per_engine} GPUs per engine",
    )


DRAM_GBPS, POOL_GBPS, POOL_LATENCY_S = 50.0, 5.0, 1e-3
"""Host DRAM over PCIe 5.0 x16, and a pool shared over a 40 Gb/s NIC (``benchmarks/bench_kv_offload.py``)."""
TIER_GIB = 1024.0
"""Tier per engine: 1 TiB of an 8xH200 node's 2 TiB of host memory (15M DeepSeek-V3 tokens)."""


def kv_tier(size: ScenarioSize) -> SimScenario:
    """HBM only vs a second tier behind it, at DRAM and at shared-pool bandwidth, on the Mooncake trace."""
    engines = max(1, size.engines // 8)
    base = base_config(size, DEEPSEEK_V3_H200, engines=engines, policy="cache_aware")
    # Sized as if 40% of each prompt were cached (HBM and tier together): HBM alone is then overloaded.
    base, compression, n = on_trace(size, base, prefill_engines=engines, computed=0.6)

    def tier(gbps: float, latency: float) -> dict[str, object]:
        return {"engine_options": {"offload": OffloadTier(capacity_gib=TIER_GIB, load_gbps=gbps,
                                                           store_gbps=gbps, latency_s=latency)}}  # fmt: skip

    return SimScenario(
        name="kv-tier",
        title=f"a second KV tier vs HBM only: {engines} x {base.profile.name}, Mooncake trace "
        f"x{compression:.1f}",
        base=base,
        arms=[
            SimArm("HBM only"),
            SimArm(f"+ DRAM {DRAM_GBPS:g} GB/s", tier(DRAM_GBPS, 0.0)),
            SimArm(f"+ pool {POOL_GBPS:g} GB/s", tier(POOL_GBPS, POOL_LATENCY_S)),
        ],
        measures=[
            Measure("hit rate (HBM + tier)", m.cached_fraction, "pct", "higher"),
            Measure("HBM hit rate", m.engine_hit_rate, "pct", "higher"),
            Measure("TTFT p50", m.ttft("p50", m.PACED), "ms", "lower"),
            Measure("TTFT p99", m.ttft("p99", m.PACED), "ms", "lower"),
            SAT_TPUT,
        ],
        headline="hit rate (HBM + tier)",
        notes=f"{TIER_GIB:g} GiB tier per engine, write-through; first {n} trace requests, half paced, "
        f"half in a closed loop of {16 * engines}{seed_note(size)}",
    )
