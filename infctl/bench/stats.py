"""Distribution summaries: mean, median, std, percentiles (linear interpolation, as numpy and vLLM use)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

PERCENTILES: tuple[float, ...] = (50.0, 90.0, 95.0, 99.0, 99.9)
"""Percentiles every distribution reports, named ``p50`` ... ``p99.9``."""


def percentile_name(p: float) -> str:
    """``50.0 -> 'p50'``, ``99.9 -> 'p99.9'``."""
    return f"p{p:g}"


def percentile(sorted_values: Sequence[float], p: float) -> float:
    """The ``p``-th percentile of already sorted values, linearly interpolated between closest ranks.

    Same as ``numpy.percentile(values, p)`` (method ``linear``); NaN for no values.
    """
    n = len(sorted_values)
    if n == 0:
        return math.nan
    rank = (n - 1) * p / 100.0
    lo = math.floor(rank)
    hi = min(lo + 1, n - 1)
    frac = rank - lo
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * frac


@dataclass(frozen=True, slots=True)
class Distribution:
    """Summary of a sample. Empty samples have ``count == 0`` and NaN everywhere else."""

    count: int
    mean: float
    median: float
    std: float
    """Population standard deviation (``numpy.std`` default, as vLLM reports)."""
    min: float
    max: float
    percentiles: dict[str, float] = field(default_factory=dict)
    """``{"p50": .., "p90": .., "p95": .., "p99": .., "p99.9": ..}``."""

    def __getitem__(self, key: str) -> float:
        """``d["p99"]``, ``d["mean"]``: one accessor for every statistic."""
        if key in self.percentiles:
            return self.percentiles[key]
        value = getattr(self, key, None)
        if not isinstance(value, int | float):
            raise KeyError(key)
        return float(value)

    def scaled(self, factor: float) -> dict[str, float | int | None]:
        """A JSON-ready dict with every statistic multiplied by ``factor`` (1000 for seconds -> ms)."""
        out: dict[str, float | int | None] = {"count": self.count}
        for key in ("mean", "median", "std", "min", "max"):
            out[key] = _json_number(getattr(self, key) * factor)
        for key, value in self.percentiles.items():
            out[key] = _json_number(value * factor)
        return out


def _json_number(x: float) -> float | None:
    return None if math.isnan(x) or math.isinf(x) else round(x, 6)


def describe(values: Iterable[float]) -> Distribution:
    """Summarize ``values`` (any order)."""
    data = sorted(values)
    n = len(data)
    if n == 0:
        nan = math.nan
        return Distribution(0, nan, nan, nan, nan, nan, {percentile_name(p): nan for p in PERCENTILES})
    mean = math.fsum(data) / n
    var = math.fsum((x - mean) ** 2 for x in data) / n
    return Distribution(
        count=n,
        mean=mean,
        median=percentile(data, 50.0),
        std=math.sqrt(var),
        min=data[0],
        max=data[-1],
        percentiles={percentile_name(p): percentile(data, p) for p in PERCENTILES},
    )
