"""Prefill/decode disaggregation: aggregated engines vs Group-mode PD vs Pool-mode PD on the same hardware.

Every arm has the same engine count (``engines`` rounded down to even) and the same Mooncake traffic
(compressed to ~60% of the fleet's prefill capacity, then a closed loop). The PD arms split the fleet into
``engines / 2`` groups of one prefill and one decode engine (:class:`~infctl.sim.cluster.pd.PDLayout`);
the live router pairs them with ``RouterCore.route_pd``, inside a group (Group mode: the fast link) or
anywhere (Pool mode: pairs across groups pay the slower spine link). Every engine runs the aggregated
profile, so the comparison isolates the serving layout, not different hardware per role.
"""

from __future__ import annotations

from infctl.bench.slo import SLO
from infctl.sim.cluster.pd import PDLayout
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

PD_SLO = SLO(ttft_s=2.0, tpot_s=0.05)
"""Goodput objectives: TTFT 2 s and TPOT 50 ms (REFERENCE.md's example SLO; DeepSeek's ~50 ms ITL)."""


def pd_scenario(size: ScenarioSize) -> SimScenario:
    """Aggregated vs Group-mode PD vs Pool-mode PD (1P1D groups) on the Mooncake trace."""
    groups = size.engines // 2
    engines = 2 * groups
    base = base_config(size, DEEPSEEK_V3_H200, engines=engines, slo=PD_SLO)
    # Half the fleet prefills in the PD arms: pace on its capacity so they are loaded, not swamped.
    base, compression, n = on_trace(size, base, prefill_engines=groups, computed=0.7)
    arms = [
        SimArm("aggregated", {"policy": "cache_aware"}),
        SimArm(f"PD group ({groups} x 1P1D)", {"pd": PDLayout(1, 1, groups, "group")}),
        SimArm(f"PD pool ({groups} x 1P1D)", {"pd": PDLayout(1, 1, groups, "pool")}),
    ]
    return SimScenario(
        name="pd",
        title=f"PD disaggregation vs aggregated: {engines} x {base.profile.name}, Mooncake trace "
        f"x{compression:.1f}",
        base=base,
        arms=arms,
        measures=[
            Measure("TTFT p50", m.ttft("p50", m.PACED), "ms", "lower"),
            Measure("TTFT p99", m.ttft("p99", m.PACED), "ms", "lower"),
            Measure("TPOT p50", m.tpot("p50", m.PACED), "ms", "lower"),
            Measure("TPOT p99", m.tpot("p99", m.PACED), "ms", "lower"),
            Measure("goodput (TTFT 2 s, TPOT 50 ms)", m.goodput(m.PACED), "req/s", "higher"),
            SAT_TPUT,
        ],
        headline="TPOT p99",
        notes=f"first {n} trace requests: half at the trace's timestamps compressed x{compression:.1f} "
        f"(latencies, goodput), half in a closed loop of {16 * engines} (throughput); PD links: the "
        f"profile's NIC in a group, half of it across groups{seed_note(size)}",
    )
