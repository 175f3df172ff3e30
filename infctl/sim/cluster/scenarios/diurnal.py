"""A diurnal day as ``infctl bench`` load stages: 24 linear ramps, one per hour, compressed to ``day_s``.

The hourly shapes are shared with ``benchmarks/bench_autoscaler_diurnal.py`` (which imports them), and the
rate between hours is interpolated linearly as there; here each hour is a ramp stage of the load plan, so
arrivals are drawn by bench's own :func:`~infctl.bench.arrivals.arrival_offsets` (Poisson along the ramp).
"""

from __future__ import annotations

from infctl.bench.config import LoadPlan, Stage
from infctl.errors import ConfigError

SHAPES: dict[str, tuple[float, ...]] = {
    # Consumer chat: busy evenings, a trough before dawn (mean/peak 0.60).
    "consumer": (0.25, 0.20, 0.17, 0.15, 0.15, 0.18, 0.28, 0.45, 0.65, 0.82, 0.92, 0.97,
                 1.00, 0.98, 0.95, 0.93, 0.90, 0.85, 0.80, 0.75, 0.68, 0.55, 0.42, 0.32),
    # Business hours: a plateau from 10:00 to 17:00, quiet nights (mean/peak 0.49).
    "business": (0.10, 0.08, 0.07, 0.07, 0.07, 0.09, 0.15, 0.35, 0.65, 0.88, 0.97, 1.00,
                 0.95, 0.97, 1.00, 0.97, 0.90, 0.75, 0.55, 0.40, 0.30, 0.22, 0.16, 0.12),
}  # fmt: skip
"""Relative request rate at each hour of the day (1.0 at the peak)."""


def shape(name: str) -> tuple[float, ...]:
    try:
        return SHAPES[name]
    except KeyError:
        raise ConfigError(f"unknown diurnal shape {name!r}", hint=f"one of: {', '.join(SHAPES)}") from None


def mean_level(name: str) -> float:
    """Mean of the day's rate over its peak (the average of the hourly ramps)."""
    s = shape(name)
    return sum((s[h] + s[(h + 1) % 24]) / 2 for h in range(24)) / 24


def diurnal_plan(name: str, peak_rate: float, day_s: float) -> LoadPlan:
    """One compressed day: hour ``h`` ramps from ``peak_rate * shape[h]`` to ``peak_rate * shape[h + 1]``
    over ``day_s / 24`` seconds (requests per second, virtual seconds)."""
    if peak_rate <= 0 or day_s <= 0:
        raise ConfigError("a diurnal day needs a peak rate > 0 and a length > 0")
    s = shape(name)
    hour = day_s / 24
    return LoadPlan(
        stages=[
            Stage(rate=peak_rate * s[h], rate_end=peak_rate * s[(h + 1) % 24], duration_s=hour)
            for h in range(24)
        ]
    )
