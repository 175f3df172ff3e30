"""The autoscaler, unchanged: ``desired_replicas`` called every ``interval_s`` of virtual time with what the
daemon would observe (each engine's queue, running and KV usage; the router's TTFT p99 over the interval).

The fleet actuator is the simulator's: new engines serve after ``startup_s``; removed ones drain first. A
scale-down cancels engines still starting before it drains serving ones (the least loaded, newest first).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from infctl.autoscaler.policy import desired_replicas
from infctl.autoscaler.snapshot import ReplicaSignals, ScalerState, ScalingSnapshot, UnitStatus
from infctl.bench.stats import percentile
from infctl.sim.cluster.config import AutoscaleSettings
from infctl.sim.cluster.fleet import Fleet, SimEngine

UNIT = "both"


@dataclass(frozen=True, slots=True)
class ReplicaPoint:
    """The fleet at one moment (recorded at every decision and every change)."""

    t: float
    """Virtual seconds."""
    desired: int
    """Engines asked for (starting + ready)."""
    ready: int
    draining: int


@dataclass(frozen=True, slots=True)
class ScaleEvent:
    t: float
    current: int
    desired: int
    reason: str


class Scaler:
    """The policy's memory between ticks, and the TTFTs of the current interval."""

    def __init__(self, settings: AutoscaleSettings) -> None:
        self.settings = settings
        self.state = ScalerState()
        self._ttfts: list[float] = []
        self.events: list[ScaleEvent] = []

    def observe_ttft(self, ttft_s: float) -> None:
        self._ttfts.append(ttft_s)

    def decide(self, fleet: Fleet, now: float) -> int:
        """Engines the policy wants now (starting + ready)."""
        replicas: list[ReplicaSignals] = []
        for e in fleet.live():
            if e.state == "starting":
                replicas.append(ReplicaSignals(e.id, UNIT, ready=False))
            elif e.state == "ready":
                s = e.signals()
                replicas.append(ReplicaSignals(e.id, UNIT, None, True, s.queue, s.running, s.kv_usage))
        ttfts, self._ttfts = sorted(self._ttfts), []
        p99 = percentile(ttfts, 99.0) if ttfts else None
        snap = ScalingSnapshot(now=now, replicas=tuple(replicas), ttft_p99_s=p99 if p99 is None or
                               math.isfinite(p99) else None)  # fmt: skip
        status = UnitStatus(desired=fleet.count("starting", "ready"), ready=fleet.count("ready"))
        decision = desired_replicas(snap, {UNIT: status}, self.settings.policy, self.state)
        self.state = decision.state
        rec = decision.recommendations[0]
        if rec.changed:
            self.events.append(ScaleEvent(now, rec.current, rec.desired, rec.reason))
        return rec.desired


def pick_removals(fleet: Fleet, n: int) -> list[SimEngine]:
    """The ``n`` engines to remove: starting ones first (newest first), then the least loaded ready ones."""
    starting = [e for e in fleet.engines if e.state == "starting"][::-1]
    ready = sorted((e for e in fleet.engines if e.state == "ready"), key=lambda e: (e.inflight, -e.asked_at))
    return (starting + ready)[:n]
