"""A capacity comparison: a second KV tier vs HBM only (autoscaling is in
:mod:`~infctl.sim.cluster.scenarios.autoscaling`).

KV tier: the Mooncake trace (22M distinct prompt tokens) on an eighth of the engines (whose HBM holds a
fifth of it with DeepSeek-V3), with no tier, a host-DRAM tier and a slower shared pool
(``infctl.sim.offload.OffloadTier``).
"""

from __future__ import annotations

from infctl.sim.cluster.scenarios import measures as m
from infctl.sim.cluster.scenarios.catalog import (
    DEEPSEEK_V3_H200,
    SAT_TPUT,
    ScenarioSize,
    base_config,
    on_trace,
    seed_note,
)
from infctl.sim.cluster.scenarios.model import Measure, SimArm, SimScenario
from infctl.sim.offload import OffloadTier

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
