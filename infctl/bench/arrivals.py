"""When to send: arrival offsets (seconds from a stage's start) for rates, ramps and bursts. Pure.

Gaps are gamma-distributed with shape ``burstiness`` and scale ``1 / (rate * burstiness)`` (shape 1 is a
Poisson process) or constant. Ramps use the time-rescaling theorem: gaps are drawn for a unit-rate process
in "operational time" ``u`` and mapped through the inverse of the cumulative rate
``Lambda(t) = r0 t + (r1 - r0) t^2 / (2 T)``, so a ramp keeps the chosen burstiness at every rate.
The first request of a stage is sent at offset 0.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator

from infctl.bench.config import ArrivalKind, Stage


def inverse_cumulative(u: float, r0: float, r1: float, duration: float) -> float:
    """The time t at which a rate ramping linearly from r0 to r1 over ``duration`` has produced u arrivals."""
    if r1 == r0:
        return u / r0 if r0 > 0 else math.inf
    a = (r1 - r0) / (2.0 * duration)
    total = r0 * duration + a * duration * duration
    if u >= total:
        return duration + (u - total) / r1 if r1 > 0 else math.inf
    return (-r0 + math.sqrt(r0 * r0 + 4.0 * a * u)) / (2.0 * a)


def arrival_offsets(
    stage: Stage, kind: ArrivalKind, burstiness: float, rng: random.Random
) -> Iterator[float]:
    """Offsets of a rate stage's sends, unbounded (the caller stops at its duration or count)."""
    assert stage.rate is not None, "arrival offsets are for rate stages"
    r0 = stage.rate
    if math.isinf(r0):
        while True:
            yield 0.0
    r1 = stage.rate_end if stage.rate_end is not None else r0
    duration = stage.duration_s or 1.0
    shape = 1.0 if kind == "poisson" and burstiness == 1.0 else burstiness
    u = 0.0
    while True:
        t = inverse_cumulative(u, r0, r1, duration)
        if math.isinf(t):
            return
        yield t
        u += 1.0 if kind == "constant" else rng.gammavariate(shape, 1.0 / shape)


def rate_at(stage: Stage, t: float) -> float | None:
    """The rate a stage asks for ``t`` seconds after its start (None for concurrency and replay)."""
    if stage.rate is None:
        return None
    if stage.rate_end is None or not stage.duration_s:
        return stage.rate
    frac = min(max(t / stage.duration_s, 0.0), 1.0)
    return stage.rate + (stage.rate_end - stage.rate) * frac
