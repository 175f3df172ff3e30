"""Autoscaling vs static provisioning over a day: the reactive policy, a KEDA-style threshold, infctl's.

One day (:mod:`~infctl.sim.cluster.scenarios.diurnal`: a business day, a consumer-shaped day, a spiky one)
of Mooncake requests, compressed so each arm sends ``requests``. The static fleet is half of ``engines``
(sized for the peak: ~60% of its prefill capacity there); the autoscaled arms run between 1 and that, on the
same day, engines and seed:

- **reactive**: the autoscaler's queue/KV/TTFT policy alone (the seed's kind of policy);
- **KEDA-style**: :func:`~infctl.autoscaler.threshold.threshold_replicas` on the engines' waiting requests,
  with the HPA's tolerance, scale-up limit and scale-down stabilisation;
- **infctl**: the same policy with its forecast (:mod:`~infctl.autoscaler.forecast`): demand one start-up
  ahead, staffing for the TTFT deadline (spare replicas), queues judged by their drain time, the SLO term,
  panic mode, and a scale-down floor from the demand of the down window.

Windows, cooldowns, decision interval, forecast windows and engine startup shrink with the day, but never
below ``MIN_TIME_SCALE`` of their real length (a 1 s decision interval), so a strongly compressed day is
harder on an autoscaler than life is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from infctl.autoscaler.settings import ForecastConfig, PolicyConfig, UnitConfig
from infctl.autoscaler.threshold import ThresholdConfig
from infctl.bench.config import LoadPlan, Stage
from infctl.bench.slo import SLO
from infctl.errors import ConfigError
from infctl.sim.cluster.config import AutoscaleSettings, SimConfig
from infctl.sim.cluster.scenarios import measures as m
from infctl.sim.cluster.scenarios.catalog import (
    DEEPSEEK_V3_H200,
    ScenarioSize,
    base_config,
    paced_rate,
    trace_spec,
)
from infctl.sim.cluster.scenarios.diurnal import diurnal_plan, level_at, mean_level
from infctl.sim.cluster.scenarios.model import Measure, SimArm, SimScenario
from infctl.sim.cluster.scenarios.pools import prefill_rate

DAYS = ("business", "consumer", "spiky")
"""The days ``simulate compare autoscaling`` runs, in order."""
TTFT_SLO_S = 2.0
"""The day's objective: TTFT under 2 s (a 15k-token Mooncake prompt prefills in ~0.25 s)."""
MIN_TIME_SCALE = 1 / 15
REAL_INTERVAL_S, REAL_STARTUP_S = 15.0, 90.0
"""The autoscaler daemon's decision interval and an engine's startup (weights, warm-up) in life."""
TRACE_PROMPT_TOKENS = 15_300
"""Mean prompt of the Mooncake trace."""
QUEUE_UP, QUEUE_DOWN = 2.0, 0.5
"""Waiting requests per replica the reactive policy scales up over and down under (and KEDA's target)."""
SLO_NAME = f"SLO attainment (TTFT <= {TTFT_SLO_S:g} s)"


@dataclass(frozen=True)
class Day:
    """A compressed day of Mooncake requests on the autoscaling comparisons' engines and timings."""

    engines: int
    """The static fleet for the peak, and every autoscaler's maximum."""
    base: SimConfig
    """Engines, the day's trace, load plan and TTFT SLO."""
    peak: float
    """Requests per second at the day's peak."""
    day_s: float
    scale: float
    """Autoscaler timings (interval, start-up, windows) per second of life."""
    forecast: ForecastConfig

    def autoscale(self, policy: PolicyConfig | ThresholdConfig) -> AutoscaleSettings:
        """``policy`` with its timings, the daemon's interval and an engine's start-up scaled to the day."""
        s = self.scale
        return AutoscaleSettings(
            policy=policy.scaled(s), interval_s=REAL_INTERVAL_S * s, startup_s=REAL_STARTUP_S * s
        )


def compressed_day(day: str, size: ScenarioSize) -> Day:
    """``day``'s shape over the shipped trace, on ``engines // 2`` DeepSeek-V3 engines (the static fleet)."""
    engines = max(2, size.engines // 2)
    base = base_config(size, DEEPSEEK_V3_H200, engines=engines)
    peak = paced_rate(engines, base.profile, TRACE_PROMPT_TOKENS)
    trace, n = trace_spec(size, 1.0)
    day_s = n / (peak * mean_level(day))
    forecast = ForecastConfig(
        replica_prompt_tps=prefill_rate(base.profile), lead_s=REAL_STARTUP_S + REAL_INTERVAL_S
    )
    plan = diurnal_plan(day, peak, day_s)
    lead = lead_in(plan.stages, size.lead_in_h * day_s / 24)
    base = replace(
        base,
        workload=trace,
        load=LoadPlan(stages=[*lead, *plan.stages]),
        lead_in_stages=len(lead),
        slo=SLO(ttft_s=TTFT_SLO_S),
    )
    return Day(engines, base, peak, day_s, max(day_s / 86_400, MIN_TIME_SCALE), forecast)


def lead_in(stages: list[Stage], seconds: float) -> list[Stage]:
    """The day's last stages that last ``seconds`` (the evening before it: the day repeats)."""
    taken: list[Stage] = []
    total = 0.0
    while total < seconds - 1e-9:
        taken.insert(0, stages[-1 - len(taken)])
        total += taken[0].duration_s or 0.0
    if abs(total - seconds) > 1e-6:
        raise ConfigError(f"a lead-in of {seconds:g} s does not end on one of the day's ramps")
    return taken


def autoscaling_day(day: str, size: ScenarioSize) -> SimScenario:
    """``day`` of Mooncake requests: a static fleet of ``engines // 2`` for the peak vs three autoscalers
    between 1 and that."""
    d = compressed_day(day, size)
    engines, base, peak, day_s, scale, forecast = d.engines, d.base, d.peak, d.day_s, d.scale, d.forecast
    units = (UnitConfig("both", min=1, max=engines),)
    reactive = PolicyConfig(units=units, ttft_slo_s=TTFT_SLO_S, queue_up=QUEUE_UP, queue_down=QUEUE_DOWN)
    keda = ThresholdConfig(units=units, target=QUEUE_UP)
    infctl = replace(reactive, forecast=forecast)
    start = max(1, math.ceil(engines * level_at(day, (24 - size.lead_in_h) % 24)))

    def auto(policy: PolicyConfig | ThresholdConfig) -> dict[str, object]:
        return {"autoscale": d.autoscale(policy), "engines": start}

    return SimScenario(
        name=f"autoscaling-{day}",
        title=f"autoscaling vs static for the peak: {base.profile.name}, a {day} day in {day_s / 60:.0f} min"
        + (f", after {size.lead_in_h} h of the evening before (not measured)" if size.lead_in_h else ""),
        base=base,
        arms=[
            SimArm(f"static {engines}"),
            SimArm(f"reactive 1-{engines}", auto(reactive)),
            SimArm(f"KEDA-style 1-{engines}", auto(keda)),
            SimArm(f"infctl 1-{engines}", auto(infctl)),
        ],
        measures=[
            Measure("GPU-hours", m.gpu_hours, "h", "lower"),
            Measure(SLO_NAME, m.slo_attainment, "pct", "higher", decimals=2),
            Measure("TTFT p50", m.ttft("p50"), "ms", "lower"),
            Measure("TTFT p99", m.ttft("p99"), "ms", "lower"),
            Measure("peak engines", m.peak_engines, "count", "lower"),
        ],
        headline="GPU-hours",
        ours=3,
        seed_says={"GPU-hours": "-26%"},
        notes=f"peak {peak:.1f} req/s; autoscaler timings x{scale:.3f} of life (interval "
        f"{REAL_INTERVAL_S * scale:.1f} s, startup {REAL_STARTUP_S * scale:.1f} s, scale-down window "
        f"{reactive.down_window_s * scale:.0f} s); KEDA-style: waiting/replica target {QUEUE_UP:g}, HPA "
        f"defaults; infctl: the reactive policy plus its forecast "
        f"({forecast.replica_prompt_tps:.0f} prompt tok/s per engine, R + {forecast.headroom:g} "
        f"engines, {forecast.lead_s:g} s ahead); "
        f"GPU-hours at {base.gpus_per_engine} GPUs per engine",
    )


def autoscaling_business(size: ScenarioSize) -> SimScenario:
    return autoscaling_day("business", size)


def autoscaling_consumer(size: ScenarioSize) -> SimScenario:
    return autoscaling_day("consumer", size)


def autoscaling_spiky(size: ScenarioSize) -> SimScenario:
    return autoscaling_day("spiky", size)
