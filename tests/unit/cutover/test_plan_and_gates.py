"""Plans, weights and gates: parsing, and the properties a split must keep for every percent."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infctl.cutover.gates import GroupStats, evaluate, parse_gate, parse_gates
from infctl.cutover.plan import (
    Plan,
    format_duration,
    observed_percent,
    parse_duration,
    parse_steps,
    timeline,
    weights_for,
)
from infctl.errors import ConfigError


@given(st.integers(0, 100), st.sampled_from([("old", "new"), ("legacy-gw", "qwen3-8b-router")]))
def test_weights_sum_to_100_and_read_back_as_the_percent(percent: int, names: tuple[str, str]) -> None:
    old, new = names
    weights = weights_for(percent, old, new)
    assert sum(weights.values()) == 100
    assert all(w >= 0 for w in weights.values())
    assert weights[new] == percent
    assert observed_percent(weights, old, new) == percent


def test_weights_refuse_bad_percent_and_same_names() -> None:
    for bad in (-1, 101):
        with pytest.raises(ConfigError, match=r"0\.\.100"):
            weights_for(bad, "old", "new")
    with pytest.raises(ConfigError, match="both"):
        weights_for(10, "x", "x")


def test_observed_percent_of_hand_written_weights() -> None:
    assert observed_percent({"old": 3, "new": 1}, "old", "new") == 25
    assert observed_percent({"old": 0, "new": 0}, "old", "new") == 0
    assert observed_percent({"new": 5}, "old", "new") == 100


def test_plan_parsing() -> None:
    assert parse_steps("2,5,10,20,40") == (2, 5, 10, 20, 40)
    assert parse_steps(" 2%, 100 ") == (2, 100)
    for bad in ("", "5,2", "0,10", "10,10", "2,x", "50,101"):
        with pytest.raises(ConfigError):
            parse_steps(bad)
    plan = Plan((2, 5, 10), 60)
    assert plan.next_step(0) == 2 and plan.next_step(5) == 10 and plan.next_step(7) == 10
    assert plan.next_step(10) is None


def test_durations() -> None:
    assert parse_duration("10m") == 600 and parse_duration("500ms") == 0.5 and parse_duration("2") == 2
    for bad in ("0s", "-1s", "soon", "5d"):
        with pytest.raises(ConfigError):
            parse_duration(bad)
    assert [format_duration(s) for s in (600, 3600, 1, 0.5)] == ["10m", "1h", "1s", "0.5s"]


def test_timeline_from_zero_and_from_the_middle() -> None:
    plan = Plan((2, 5, 10), 60)
    assert timeline(plan, 0) == [(0.0, 2), (60.0, 5), (120.0, 10)]
    assert timeline(plan, 5) == [(60.0, 10)]


def test_gate_parsing() -> None:
    g = parse_gates("ttft_p99<2s, error_rate<1%,ttft_p90<=old*1.2,throttle_rate<old+0.5%,ttft_p50<old")
    assert [(x.metric, x.op, x.relative) for x in g] == [
        ("ttft_p99", "<", False), ("error_rate", "<", False), ("ttft_p90", "<=", True),
        ("throttle_rate", "<", True), ("ttft_p50", "<", True),
    ]  # fmt: skip
    assert g[0].limit == 2.0 and g[1].limit == pytest.approx(0.01)
    assert g[2].factor == 1.2 and g[3].offset == pytest.approx(0.005) and g[4].factor == 1.0
    assert parse_gate("ttft_p99<500ms").limit == 0.5
    assert parse_gate("ttft_p99 < old + 50ms").offset == pytest.approx(0.05)
    assert parse_gates("") == ()
    for bad in ("latency<2s", "ttft_p99>2s", "ttft_p99<fast", "error_rate<old*x", "ttft_p99"):
        with pytest.raises(ConfigError, match="--gate"):
            parse_gates(bad)


def stats(requests: float, errors: float = 0, throttled: float = 0, p99: float | None = 0.5) -> GroupStats:
    return GroupStats(requests, errors, throttled, {0.5: p99, 0.9: p99, 0.99: p99})


def test_absolute_gates_pass_and_fail_with_a_reason() -> None:
    gates = parse_gates("ttft_p99<2s,error_rate<1%,throttle_rate<5%")
    ok = evaluate(gates, stats(100, errors=0, p99=1.5), None, min_requests=20)
    assert [r.passed for r in ok] == [True, True, True]
    bad = evaluate(gates, stats(100, errors=3, throttled=10, p99=2.5), None, min_requests=20)
    assert [r.passed for r in bad] == [False, False, False]
    assert bad[0].detail == "ttft_p99 2.50s >= 2.00s"
    assert bad[1].detail == "error_rate 3% >= 1%"


def test_relative_gates_compare_new_against_old() -> None:
    gates = parse_gates("ttft_p99<old*1.2")
    assert evaluate(gates, stats(100, p99=0.55), stats(500, p99=0.5), min_requests=20)[0].passed is True
    slow = evaluate(gates, stats(100, p99=0.7), stats(500, p99=0.5), min_requests=20)[0]
    assert slow.passed is False and slow.detail == "ttft_p99 700ms >= 600ms (old 500ms)"


def test_too_little_traffic_is_inconclusive_not_a_pass() -> None:
    gates = parse_gates("ttft_p99<2s,error_rate<old*2")
    few = evaluate(gates, stats(5), stats(500), min_requests=20)
    assert [r.passed for r in few] == [None, None] and "5 requests on new" in few[0].detail
    no_old = evaluate(gates, stats(100), None, min_requests=20)
    assert [r.passed for r in no_old] == [True, None]
    no_ttft = evaluate(parse_gates("ttft_p50<1s"), stats(100, p99=None), None, min_requests=20)
    assert no_ttft[0].passed is None
