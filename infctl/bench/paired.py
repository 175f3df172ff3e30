"""Paired comparisons of two systems measured side by side: "is A no worse than B?" as a printed verdict.

Each round measures both systems under the same conditions (same rate, same minute of the machine's noise),
so the per-round differences ``a - b`` cancel what the rounds share. Their median comes with a
distribution-free confidence interval from the sign test (order statistics of the differences, no
assumption about their shape), and the verdict says only what that interval shows:

- ``ahead``: the whole interval is below 0 (A's figure is lower: better, for a latency);
- ``behind``: the whole interval is above 0;
- ``tie``: the interval holds 0, so this many rounds cannot tell them apart.

"A is no worse than B" holds unless the verdict is ``behind``. With fewer than 6 rounds no interval
reaches 95% coverage and the verdict is ``tie`` whatever the differences.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Verdict = Literal["ahead", "behind", "tie"]


@dataclass(frozen=True, slots=True)
class Paired:
    """The per-round differences ``a - b`` of one figure, summarised."""

    n: int
    """Rounds (pairs)."""
    median: float
    """Median difference (NaN for no rounds)."""
    low: float
    """Lower end of the confidence interval for the median difference (-inf when none is possible)."""
    high: float
    """Upper end (+inf when none is possible)."""
    coverage: float
    """The interval's exact coverage under the sign test (at least the level asked for, or 0.0)."""
    lower: int
    """Rounds where A's figure was lower than B's."""
    p_value: float
    """Two-sided sign-test p-value of "A and B are as likely to be lower" (ties dropped)."""

    @property
    def verdict(self) -> Verdict:
        if self.high < 0:
            return "ahead"
        if self.low > 0:
            return "behind"
        return "tie"


def paired(diffs: Sequence[float], level: float = 0.95) -> Paired:
    """Summarise the differences ``a - b`` of paired rounds (see the module docstring)."""
    xs = sorted(d for d in diffs if not math.isnan(d))
    n = len(xs)
    if n == 0:
        return Paired(0, math.nan, -math.inf, math.inf, 0.0, 0, 1.0)
    k = _order_statistic(n, level)
    low, high, coverage = (-math.inf, math.inf, 0.0) if k == 0 else (xs[k - 1], xs[n - k], _coverage(n, k))
    lower = sum(x < 0 for x in xs)
    higher = sum(x > 0 for x in xs)
    return Paired(n, statistics.median(xs), low, high, coverage, lower, _sign_p(lower, higher))


def _coverage(n: int, k: int) -> float:
    """Coverage of ``[x(k), x(n-k+1)]`` for the median: 1 - 2 P(Binomial(n, 1/2) <= k - 1)."""
    return 1.0 - 2.0 * _binom_cdf(k - 1, n)


def _order_statistic(n: int, level: float) -> int:
    """The largest k >= 1 whose interval ``[x(k), x(n-k+1)]`` covers the median with at least ``level``;
    0 when not even ``[min, max]`` does."""
    best = 0
    for k in range(1, n // 2 + 1):
        if _coverage(n, k) >= level:
            best = k
        else:
            break
    return best


def _binom_cdf(k: int, n: int) -> float:
    """P(Binomial(n, 1/2) <= k)."""
    return float(sum(math.comb(n, i) for i in range(k + 1))) / float(2**n)


def _sign_p(lower: int, higher: int) -> float:
    m = lower + higher
    if m == 0:
        return 1.0
    return min(1.0, 2.0 * _binom_cdf(min(lower, higher), m))
