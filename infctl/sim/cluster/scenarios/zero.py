"""Scale-to-zero over a day with a night of no traffic (``infctl simulate compare scale-to-zero``).

The ``night`` day (:mod:`~infctl.sim.cluster.scenarios.diurnal`: business hours, nothing from midnight to
05:00) of Mooncake requests on the autoscaling comparison's engines, timings and policy. Three arms: the
static fleet for the peak; infctl's policy between 1 and that; the same policy allowed to 0
(``min`` 0, ``scale_to_zero_after_s``), whose first morning request waits in the router's admission queue
(``hold_when_empty_s``) while an engine starts: its TTFT includes the start-up, which the TTFT max shows.
Both autoscaled arms run the router's admission queue, so they differ only in ``min``.
"""

from __future__ import annotations

from infctl.autoscaler.settings import PolicyConfig, UnitConfig
from infctl.sim.cluster.admission import AdmissionSettings
from infctl.sim.cluster.result import SimResult
from infctl.sim.cluster.scenarios import measures as m
from infctl.sim.cluster.scenarios.autoscaling import (
    QUEUE_DOWN,
    QUEUE_UP,
    REAL_INTERVAL_S,
    REAL_STARTUP_S,
    SLO_NAME,
    TTFT_SLO_S,
    compressed_day,
)
from infctl.sim.cluster.scenarios.catalog import (
    ScenarioSize,
)
from infctl.sim.cluster.scenarios.model import Measure, SimArm, SimScenario

DAY = "night"
REAL_IDLE_S = 900.0
"""Scale to zero after 15 minutes without a request (KEDA's cooldownPeriod is 5 minutes)."""
REAL_HOLD_S = REAL_STARTUP_S + 3 * REAL_INTERVAL_S
"""The router holds a request this long for an engine: a decision interval to notice it, a start-up, and
slack."""


def fewest_engines(r: SimResult) -> float:
    return float(min((p.desired for p in r.replicas), default=r.config.engines))


def scale_to_zero(size: ScenarioSize) -> SimScenario:
    """The ``night`` day: static for the peak vs infctl between 1 and it vs infctl from 0."""
    d = compressed_day(DAY, size)
    engines, base, peak, day_s, scale, forecast = d.engines, d.base, d.peak, d.day_s, d.scale, d.forecast
    admission = AdmissionSettings(deadline_s=REAL_HOLD_S * 4, hold_when_empty_s=REAL_HOLD_S * scale)

    def arm(lo: int) -> dict[str, object]:
        idle = REAL_IDLE_S if lo == 0 else None
        unit = UnitConfig("both", min=lo, max=engines, scale_to_zero_after_s=idle)
        policy = PolicyConfig(units=(unit,), ttft_slo_s=TTFT_SLO_S, queue_up=QUEUE_UP, queue_down=QUEUE_DOWN,
                              forecast=forecast)  # fmt: skip
        return {"autoscale": d.autoscale(policy), "engines": 1, "admission": admission}

    return SimScenario(
        name="scale-to-zero",
        title=f"scale-to-zero: {base.profile.name}, a day with a night of no traffic in {day_s / 60:.0f} min",
        base=base,
        arms=[
            SimArm(f"static {engines}"),
            SimArm(f"infctl 1-{engines}", arm(1)),
            SimArm(f"infctl 0-{engines}", arm(0)),
        ],
        measures=[
            Measure("GPU-hours", m.gpu_hours, "h", "lower"),
            Measure(SLO_NAME, m.slo_attainment, "pct", "higher", decimals=2),
            Measure("TTFT p99", m.ttft("p99"), "ms", "lower"),
            Measure("TTFT max", m.ttft("max"), "ms", "lower"),
            Measure("fewest engines", fewest_engines, "count", "lower"),
        ],
        headline="GPU-hours",
        ours=2,
        notes=f"peak {peak:.1f} req/s; no traffic 00:00-05:00; autoscaler timings x{scale:.3f} of life "
        f"(interval {REAL_INTERVAL_S * scale:.1f} s, startup {REAL_STARTUP_S * scale:.1f} s, scale to zero "
        f"after {REAL_IDLE_S * scale:.0f} s idle, router holds a request {REAL_HOLD_S * scale:.0f} s for an "
        f"engine); both autoscaled arms run the router's admission queue; GPU-hours at "
        f"{base.gpus_per_engine} GPUs per engine",
    )


__all__ = ["scale_to_zero"]
