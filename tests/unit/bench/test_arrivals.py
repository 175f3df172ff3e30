"""Arrival processes: gamma statistics, constant gaps, ramps by time rescaling."""

from __future__ import annotations

import itertools
import random
import statistics

import pytest

from infctl.bench.arrivals import arrival_offsets, inverse_cumulative, rate_at
from infctl.bench.config import Stage


def gaps(stage: Stage, kind: str, burstiness: float, n: int = 20000) -> list[float]:
    offs = list(itertools.islice(arrival_offsets(stage, kind, burstiness, random.Random(7)), n))  # type: ignore[arg-type]
    assert offs[0] == 0.0
    return [b - a for a, b in itertools.pairwise(offs)]


@pytest.mark.parametrize("burstiness", [1.0, 0.25, 4.0])
def test_gamma_mean_and_cv(burstiness: float) -> None:
    g = gaps(Stage(rate=10.0, num_requests=1), "gamma", burstiness)
    mean = statistics.fmean(g)
    assert mean == pytest.approx(0.1, rel=0.05)
    cv = statistics.pstdev(g) / mean  # gamma with shape k has CV 1/sqrt(k)
    assert cv == pytest.approx(burstiness**-0.5, rel=0.08)


def test_constant_and_infinite() -> None:
    g = gaps(Stage(rate=4.0, num_requests=1), "constant", 1.0, 100)
    assert all(x == pytest.approx(0.25) for x in g)
    inf = list(
        itertools.islice(
            arrival_offsets(Stage(rate=float("inf"), num_requests=1), "poisson", 1.0, random.Random(0)), 5
        )
    )
    assert inf == [0.0] * 5


def test_ramp_count_matches_the_integral() -> None:
    stage = Stage(rate=10.0, rate_end=50.0, duration_s=20.0)
    offs = list(
        itertools.takewhile(lambda t: t < 20.0, arrival_offsets(stage, "poisson", 1.0, random.Random(3)))
    )
    assert len(offs) == pytest.approx((10 + 50) / 2 * 20, rel=0.06)  # 600 expected
    first_half = sum(1 for t in offs if t < 10.0)
    assert first_half == pytest.approx(10 * 10 + 40 / 20 * 10 * 10 / 2, rel=0.1)  # integral of r(t) on [0,10]
    assert rate_at(stage, 5.0) == 20.0 and rate_at(stage, 99.0) == 50.0


def test_inverse_cumulative_closed_forms() -> None:
    assert inverse_cumulative(10.0, 5.0, 5.0, 1.0) == 2.0
    # ramp 0 -> 2 over 1 s: Lambda(t) = t^2, so u = 0.25 at t = 0.5; past the end the end rate continues
    assert inverse_cumulative(0.25, 0.0, 2.0, 1.0) == pytest.approx(0.5)
    assert inverse_cumulative(3.0, 0.0, 2.0, 1.0) == pytest.approx(2.0)
