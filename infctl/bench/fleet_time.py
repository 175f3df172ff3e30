"""What a live fleet costs over a run, and a load plan on a dilated clock (pure).

A running local release reports its units through the supervisor's ``GET /scale`` (ready, starting and
stopping engines per unit). An engine holds its GPU from the moment it is asked for until it has stopped,
as the simulator counts GPU time (``SimResult.gpu_hours``): starting (loading weights, warming up) and
stopping (draining) engines cost as much as ready ones. Sampling that report and integrating the count as
a step function gives the engine-seconds of a run, the live stand-in for GPU-hours.

Simulated engines may run faster or slower than real time (``model.sim.speedup``: simulated seconds per
wall second). A load plan written in simulated seconds runs on the wall clock with its rates multiplied and
its durations divided by that factor (:func:`wall_plan`), so every queue and TTFT is the simulated one.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from infctl.bench.config import LoadPlan, Stage
from infctl.errors import ConfigError


@dataclass(frozen=True, slots=True)
class FleetSample:
    """The fleet at one instant (wall seconds on any monotonic clock)."""

    t: float
    ready: int
    starting: int = 0
    stopping: int = 0

    @property
    def held(self) -> int:
        """Engines holding a GPU: ready, starting and stopping ones."""
        return self.ready + self.starting + self.stopping


def fleet_sample(t: float, scale_status: Mapping[str, Any]) -> FleetSample:
    """One sample from the supervisor's ``GET /scale`` body (every unit's engines added up)."""
    units = scale_status["units"].values()
    return FleetSample(
        t=t,
        ready=sum(int(u["ready"]) for u in units),
        starting=sum(int(u.get("starting", 0)) for u in units),
        stopping=sum(int(u.get("stopping", 0)) for u in units),
    )


def engine_seconds(samples: Sequence[FleetSample], start: float, end: float) -> float:
    """Engine-seconds held between ``start`` and ``end``: each sample's count holds until the next one (a
    step function); before the first sample the first count holds, after the last the last."""
    if end <= start or not samples:
        return 0.0
    ordered = sorted(samples, key=lambda s: s.t)
    total = 0.0
    edges = [*ordered, FleetSample(t=max(end, ordered[-1].t), ready=0)]
    first = ordered[0]
    if first.t > start:
        total += first.held * (min(first.t, end) - start)
    for here, after in itertools.pairwise(edges):
        lo, hi = max(here.t, start), min(after.t, end)
        if hi > lo:
            total += here.held * (hi - lo)
    return total


def mean_held(samples: Sequence[FleetSample], start: float, end: float) -> float:
    """Engines held on average between ``start`` and ``end``."""
    return engine_seconds(samples, start, end) / (end - start) if end > start else 0.0


def peak_held(samples: Sequence[FleetSample]) -> int:
    return max((s.held for s in samples), default=0)


def mean_start_up(samples: Sequence[FleetSample]) -> float | None:
    """Mean seconds an engine spent starting: the starting engines' seconds over the starts seen (a rise in
    the starting count); None when no engine started."""
    ordered = sorted(samples, key=lambda s: s.t)
    starts = sum(max(0, b.starting - a.starting) for a, b in itertools.pairwise(ordered))
    if not starts:
        return None
    return sum(a.starting * (b.t - a.t) for a, b in itertools.pairwise(ordered)) / starts


def wall_plan(plan: LoadPlan, speedup: float) -> LoadPlan:
    """``plan`` (in simulated seconds) as sent on the wall clock to engines running ``speedup`` simulated
    seconds per wall second: rates times ``speedup``, durations divided by it; counts, concurrencies and
    arrivals unchanged."""
    if speedup <= 0:
        raise ConfigError(f"speedup must be > 0, got {speedup:g}", hint="e.g. --speedup 1")

    def stage(s: Stage) -> Stage:
        return s.model_copy(
            update={
                "rate": None if s.rate is None else s.rate * speedup,
                "rate_end": None if s.rate_end is None else s.rate_end * speedup,
                "duration_s": None if s.duration_s is None else s.duration_s / speedup,
            }
        )

    return plan.model_copy(update={"stages": [stage(s) for s in plan.stages]})


def plan_seconds(plan: LoadPlan) -> float:
    """How long the plan's timed stages last together (stages ended by a count add nothing)."""
    return sum(s.duration_s or 0.0 for s in plan.stages)
