"""A KEDA-style threshold policy (pure): the baseline infctl's policy is measured against.

What KEDA's Prometheus scaler does through the HPA, on one metric: the engines' waiting requests (vLLM's
``num_requests_waiting``, the metric KEDA's vLLM examples scale on) averaged over the ready replicas against a
target per replica. ``desired = ceil(ready * average / target)``, left alone within the HPA's 10% tolerance;
a scale-up adds at most the larger of ``up_pods`` and ``up_percent`` per decision (the HPA's default
policy); a scale-down goes only to the highest recommendation of the last ``stabilization_s`` (the HPA's
300 s window). Same call shape as :func:`~infctl.autoscaler.policy.desired_replicas`, so the simulator and
the daemon run either.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

from infctl.autoscaler.settings import UnitConfig
from infctl.autoscaler.snapshot import (
    Decision,
    Recommendation,
    ScalerState,
    ScalingSnapshot,
    Unit,
    UnitStatus,
)
from infctl.errors import ConfigError


@dataclass(frozen=True, slots=True)
class ThresholdConfig:
    """The threshold policy's settings (KEDA ScaledObject + HPA behavior defaults)."""

    units: tuple[UnitConfig, ...]
    target: float = 2.0
    """Waiting requests per ready replica (the ScaledObject trigger's threshold)."""
    tolerance: float = 0.1
    """No change while average / target is within 1 +- this (the HPA's tolerance)."""
    stabilization_s: float = 300.0
    """Scale-down stabilisation window, seconds."""
    up_pods: int = 4
    up_percent: float = 100.0
    """A scale-up adds at most max(up_pods, up_percent% of the current count)."""

    def __post_init__(self) -> None:
        if not (self.target > 0 and 0 <= self.tolerance < 1 and self.stabilization_s >= 0):
            raise ConfigError("threshold policy: needs target > 0, 0 <= tolerance < 1, stabilization_s >= 0")
        if self.up_pods < 1 or self.up_percent <= 0:
            raise ConfigError("threshold policy: up_pods >= 1 and up_percent > 0")
        for u in self.units:
            if not 1 <= u.min <= u.max:
                raise ConfigError(f"threshold policy: {u.name}: bounds need 1 <= min <= max")

    def unit(self, name: str) -> UnitConfig:
        return next(u for u in self.units if u.name == name)

    def scaled(self, factor: float) -> ThresholdConfig:
        return replace(self, stabilization_s=self.stabilization_s * factor)


def threshold_replicas(
    snapshot: ScalingSnapshot, current: Mapping[Unit, UnitStatus], config: ThresholdConfig, state: ScalerState
) -> Decision:
    """One decision for every unit ``current`` reports."""
    recommendations, memory = [], state
    for unit in config.units:
        status = current.get(unit.name)
        if status is None:
            continue
        mem = memory.of(unit.name)
        base, ready = status.desired, status.ready
        seen = [
            r.queue
            for r in snapshot.replicas
            if r.ready and r.role in unit.roles and (unit.group is None or r.group == unit.group)
        ]
        if not seen or ready == 0:
            recommendations.append(Recommendation(unit.name, base, base, "no metric from ready replicas"))
            continue
        average = sum(seen) / len(seen)
        ratio = average / config.target
        raw = base if abs(ratio - 1) <= config.tolerance else math.ceil(ready * ratio - 1e-9)
        raw = max(unit.min, min(unit.max, raw))
        window = tuple(
            (t, n) for t, n in mem.recommendations if t > snapshot.now - config.stabilization_s - 1e-9
        )
        window = (*window, (snapshot.now, raw))
        if raw > base:
            limit = max(base + config.up_pods, math.ceil(base * (1 + config.up_percent / 100)))
            desired = min(raw, limit)
            reason = f"waiting/replica {average:.2f} over target {config.target:g}: {raw} wanted"
        else:
            desired = min(base, max(n for _, n in window))
            reason = (
                f"waiting/replica {average:.2f} vs target {config.target:g}; highest of the window {desired}"
            )
        memory = memory.with_unit(unit.name, replace(mem, recommendations=window))
        inputs = (("ready", float(ready)), ("queue_per_replica", average), ("recommended", float(raw)))
        recommendations.append(Recommendation(unit.name, base, desired, reason, inputs))
    return Decision(tuple(recommendations), memory)
