"""A diurnal day as ``infctl bench`` load stages: ramps between the day's levels, compressed to ``day_s``.

The hourly shapes are shared with ``benchmarks/bench_autoscaler_diurnal.py`` (which imports them), and the
rate between hours is interpolated linearly as there; here each ramp is a stage of the load plan, so arrivals
are drawn by bench's own :func:`~infctl.bench.arrivals.arrival_offsets` (Poisson along the ramp). A spiky
day (``SPIKES``) is a shape with bursts on top: the rate jumps to a level within three minutes, holds, and
falls back as fast, at hours no shape foretells.
"""

from __future__ import annotations

import itertools

from infctl.bench.config import LoadPlan, Stage
from infctl.errors import ConfigError

SHAPES: dict[str, tuple[float, ...]] = {
    # Consumer chat: busy evenings, a trough before dawn (mean/peak 0.60).
    "consumer": (0.25, 0.20, 0.17, 0.15, 0.15, 0.18, 0.28, 0.45, 0.65, 0.82, 0.92, 0.97,
                 1.00, 0.98, 0.95, 0.93, 0.90, 0.85, 0.80, 0.75, 0.68, 0.55, 0.42, 0.32),
    # Business hours: a plateau from 10:00 to 17:00, quiet nights (mean/peak 0.49).
    "business": (0.10, 0.08, 0.07, 0.07, 0.07, 0.09, 0.15, 0.35, 0.65, 0.88, 0.97, 1.00,
                 0.95, 0.97, 1.00, 0.97, 0.90, 0.75, 0.55, 0.40, 0.30, 0.22, 0.16, 0.12),
    # An internal tool: business hours, and no traffic at all from midnight to 05:00 (scale-to-zero).
    "night": (0.00, 0.00, 0.00, 0.00, 0.00, 0.00, 0.15, 0.35, 0.65, 0.88, 0.97, 1.00,
              0.95, 0.97, 1.00, 0.97, 0.90, 0.75, 0.55, 0.40, 0.30, 0.22, 0.16, 0.08),
}  # fmt: skip
"""Relative request rate at each hour of the day (1.0 at the peak)."""
SPIKES: dict[str, tuple[str, tuple[tuple[float, float, float], ...]]] = {
    # A business day with bursts (a batch job, a launch, a retry storm): (start hour, hours, level).
    "spiky": ("business", ((3.0, 0.5, 0.6), (11.0, 0.25, 1.25), (16.5, 0.5, 1.2), (20.5, 0.25, 1.0))),
}
"""Spiky days: a base shape and its bursts."""
_NONE = 1e-9
"""Requests per second standing for none (a stage's rate must be > 0)."""
_EDGE_H = 0.05
"""A burst rises and falls over this many hours (three minutes)."""


def shape(name: str) -> tuple[float, ...]:
    """The hourly levels of ``name`` (a spiky day: its base shape's)."""
    try:
        return SHAPES[SPIKES[name][0] if name in SPIKES else name]
    except KeyError:
        known = ", ".join([*SHAPES, *SPIKES])
        raise ConfigError(f"unknown diurnal shape {name!r}", hint=f"one of: {known}") from None


def breakpoints(name: str) -> list[tuple[float, float]]:
    """(hour, level) points the rate ramps linearly between, from 0 to 24 h."""
    s = shape(name)
    points = [(float(h), s[h % 24]) for h in range(25)]
    for start, hours, level in SPIKES.get(name, ("", ()))[1]:
        points = [p for p in points if not start <= p[0] <= start + hours + 2 * _EDGE_H]
        base0, base1 = _at(s, start), _at(s, start + hours + 2 * _EDGE_H)
        points += [(start, base0), (start + _EDGE_H, level), (start + _EDGE_H + hours, level)]
        points.append((start + hours + 2 * _EDGE_H, base1))
    return sorted(points)


def _at(s: tuple[float, ...], hour: float) -> float:
    h = int(hour) % 24
    frac = hour - int(hour)
    return s[h] * (1 - frac) + s[(h + 1) % 24] * frac


def mean_level(name: str) -> float:
    """Mean of the day's rate over its peak (the average of its ramps, weighted by their length)."""
    p = breakpoints(name)
    return sum((h1 - h0) * (a + b) / 2 for (h0, a), (h1, b) in itertools.pairwise(p)) / 24


def level_at(name: str, hour: float) -> float:
    """The day's relative rate at ``hour``."""
    p = breakpoints(name)
    for (h0, a), (h1, b) in itertools.pairwise(p):
        if h0 <= hour <= h1:
            return a + (b - a) * (hour - h0) / (h1 - h0)
    return p[-1][1]


def diurnal_plan(name: str, peak_rate: float, day_s: float) -> LoadPlan:
    """One compressed day: a ramp stage between each two of the day's :func:`breakpoints` (hour ``h`` of a
    plain shape ramps from ``peak_rate * shape[h]`` to ``peak_rate * shape[h + 1]`` over ``day_s / 24``
    seconds), in requests per second and virtual seconds."""
    if peak_rate <= 0 or day_s <= 0:
        raise ConfigError("a diurnal day needs a peak rate > 0 and a length > 0")
    p = breakpoints(name)
    hour = day_s / 24
    stages: list[Stage] = []
    for (h0, a), (h1, b) in itertools.pairwise(p):
        if a == b == 0 and stages and stages[-1].rate == _NONE:
            stages[-1] = Stage(
                rate=_NONE, rate_end=0, duration_s=(stages[-1].duration_s or 0) + (h1 - h0) * hour
            )
        else:
            # A stage's rate must be > 0: a span without traffic is one stage ramping from (almost) nothing,
            # whose only request is the one every stage sends as it starts.
            stages.append(
                Stage(rate=max(peak_rate * a, _NONE), rate_end=peak_rate * b, duration_s=(h1 - h0) * hour)
            )
    return LoadPlan(stages=stages)
