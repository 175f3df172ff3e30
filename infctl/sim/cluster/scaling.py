"""The autoscaler, unchanged: ``desired_replicas`` (or the KEDA-style ``threshold_replicas``) called every
``interval_s`` of virtual time with what the daemon would observe (each engine's queue, running and KV usage;
the router's TTFT p99 over the interval, and its request and prompt-token counters' rates: the demand).

The fleet actuator is the simulator's: new engines serve after ``startup_s``; removed ones drain first. A
scale-down cancels engines still starting before it drains serving ones (the least loaded, newest first).
A daemon restart (``AutoscaleSettings.restarts``) stops decisions for ``restart_down_s``; the new daemon
restores what the old one saved after its last decision (``infctl.autoscaler.memory``), or starts cold,
and its first reading of the router's counters has no demand yet, as the daemon's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from infctl.autoscaler.memory import record, restore
from infctl.autoscaler.policy import desired_replicas
from infctl.autoscaler.snapshot import Demand, ReplicaSignals, ScalerState, ScalingSnapshot, UnitStatus
from infctl.autoscaler.threshold import ThresholdConfig, threshold_replicas
from infctl.bench.stats import percentile
from infctl.sim.cluster.config import AutoscaleSettings
from infctl.sim.cluster.fleet import Fleet, SimEngine
from infctl.sim.cluster.routing import SimRouter

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
        self._counted: tuple[float, int, int] | None = None
        """(time, requests routed, prompt tokens routed less expected cached) at the last decision."""
        self._restarts = sorted(settings.restarts)
        self._decided_at: float | None = None

    def observe_ttft(self, ttft_s: float) -> None:
        self._ttfts.append(ttft_s)

    def demand(self, router: SimRouter, now: float) -> Demand | None:
        """The router's counters' rates since the last decision, as the daemon reads them."""
        counted = (now, sum(router.reasons.values()), router.prompt_tokens - router.matched_tokens)
        last, self._counted = self._counted, counted
        if last is None or now <= last[0]:
            return None
        dt = now - last[0]
        return Demand((counted[1] - last[1]) / dt, max(0, counted[2] - last[2]) / dt)

    def decide(self, fleet: Fleet, router: SimRouter, now: float, waiting: int = 0) -> int:
        """Engines the policy wants now (starting + ready); ``waiting``: requests the router's admission
        queue holds (with no engine left, the only sign of demand)."""
        while self._restarts and now >= self._restarts[0]:
            if now < self._restarts[0] + self.settings.restart_down_s:
                return fleet.count("starting", "ready")  # no daemon: the counts stay as they are
            self._restart(now)
            self._restarts.pop(0)
        self._decided_at = now
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
                               math.isfinite(p99) else None, demand=self.demand(router, now),
                               router_queue=float(waiting))  # fmt: skip
        status = UnitStatus(desired=fleet.count("starting", "ready"), ready=fleet.count("ready"))
        policy = self.settings.policy
        if isinstance(policy, ThresholdConfig):
            decision = threshold_replicas(snap, {UNIT: status}, policy, self.state)
        else:
            decision = desired_replicas(snap, {UNIT: status}, policy, self.state)
        self.state = decision.state
        rec = decision.recommendations[0]
        if rec.changed:
            self.events.append(ScaleEvent(now, rec.current, rec.desired, rec.reason))
        return rec.desired

    def _restart(self, now: float) -> None:
        saved_at = self._decided_at if self._decided_at is not None else now
        policy = self.settings.policy
        fc = None if isinstance(policy, ThresholdConfig) else policy.forecast
        window = None if fc is None else fc.window_s
        # One clock in the simulator: it is the wall clock the memory is dated by, too.
        saved = record(self.state, saved_at, saved_at)
        self.state = restore(saved, now, now, window)[0] if self.settings.memory else ScalerState()
        self._counted, self._ttfts = None, []


def pick_removals(fleet: Fleet, n: int) -> list[SimEngine]:
    """The ``n`` engines to remove: starting ones first (newest first), then the least loaded ready ones."""
    starting = [e for e in fleet.engines if e.state == "starting"][::-1]
    ready = sorted((e for e in fleet.engines if e.state == "ready"), key=lambda e: (e.inflight, -e.asked_at))
    return (starting + ready)[:n]
