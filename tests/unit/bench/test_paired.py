"""Paired verdicts: the sign-test interval of the median difference, and what it lets a benchmark say."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infctl.bench.paired import paired


def test_six_rounds_all_lower_is_ahead_with_the_min_max_interval() -> None:
    p = paired([-0.3, -0.1, -0.2, -0.05, -0.4, -0.15])
    assert (p.n, p.lower, p.verdict) == (6, 6, "ahead")
    assert (p.low, p.high) == (-0.4, -0.05)
    assert p.coverage == pytest.approx(1 - 2 / 64)  # [x(1), x(6)] of six
    assert p.median == pytest.approx(-0.175)
    assert p.p_value == pytest.approx(2 / 64)


def test_one_round_the_other_way_makes_six_rounds_a_tie() -> None:
    p = paired([-0.3, -0.1, -0.2, 0.05, -0.4, -0.15])
    assert p.verdict == "tie" and p.lower == 5 and p.high == 0.05


def test_all_higher_is_behind() -> None:
    assert paired([0.1] * 8).verdict == "behind"


def test_twelve_rounds_drop_the_two_extremes_each_side() -> None:
    diffs = [-10.0, -5.0, *([-1.0] * 8), 3.0, 20.0]
    p = paired(diffs)
    assert (p.low, p.high) == (-1.0, -1.0)  # [x(3), x(10)] of twelve: 96.1%
    assert p.coverage == pytest.approx(1 - 2 * (1 + 12 + 66) / 4096)
    assert p.verdict == "ahead"


def test_too_few_rounds_cannot_give_a_verdict() -> None:
    p = paired([-1.0] * 5)  # [min, max] of five covers the median with 93.75% only
    assert p.verdict == "tie" and p.coverage == 0.0 and math.isinf(p.low)


def test_no_rounds() -> None:
    p = paired([])
    assert p.n == 0 and p.verdict == "tie" and math.isnan(p.median)


def test_nan_rounds_are_left_out() -> None:
    assert paired([math.nan, *([-1.0] * 6)]).n == 6


@given(st.lists(st.floats(-10, 10), min_size=6, max_size=40))
def test_the_interval_holds_the_median_and_flips_with_the_sign(diffs: list[float]) -> None:
    p, q = paired(diffs), paired([-d for d in diffs])
    assert p.low <= p.median <= p.high and p.coverage >= 0.95
    assert (q.low, q.high) == (-p.high, -p.low)
    flipped = {"ahead": "behind", "behind": "ahead", "tie": "tie"}
    assert q.verdict == flipped[p.verdict]
