"""The policy's memory saved as JSON and restored onto another process's clock."""

from __future__ import annotations

import json
from dataclasses import fields, replace

import pytest
from policykit import aggregated

from infctl.autoscaler import memory as m
from infctl.autoscaler.forecast import outlook
from infctl.autoscaler.settings import ForecastConfig
from infctl.autoscaler.snapshot import Demand, ForecastState, ScalerState, ScalingSnapshot, UnitState

FORECAST = ForecastState(
    at=95.0,
    since=-50.0,
    level=50_000.0,
    trend=12.5,
    slo_scale=0.7,
    panic_until=110.0,
    needs=((80.0, 2), (95.0, 3)),
    recent=((90.0, 48_000.0), (95.0, 52_000.0)),
    weight=0.9,
    requests=3.5,
    size_tokens=49_000.0,
    size_requests=3.2,
)
UNIT = UnitState(
    high_since=70.0,
    low_since=None,
    last_scale_at=90.0,
    pending=True,
    settled_at=60.0,
    forecast=FORECAST,
    recommendations=((85.0, 4),),
    idle_since=30.0,
)


def through_json(state: ScalerState, now: float, wall: float) -> object:
    return json.loads(json.dumps(m.record(state, now, wall)))


def test_times_move_onto_the_new_clock_and_values_are_kept() -> None:
    # Saved at policy time 100 (wall 1000); restored 30 wall seconds later by a process whose clock reads 5.
    data = through_json(ScalerState(units=(("both", UNIT),)), now=100.0, wall=1000.0)
    state, gap = m.restore(data, now=5.0, wall=1030.0, forecast_window_s=120.0)
    assert gap == 30.0
    got = state.of("both")
    shift = (5.0 - 100.0) - 30.0  # an event 10 s before the save is now 40 s before ``now``
    assert got.last_scale_at == 90.0 + shift == 5.0 - 40.0
    assert got.settled_at == 60.0 + shift
    assert got.recommendations == ((85.0 + shift, 4),)
    assert got.pending is True
    fc = got.forecast
    assert fc is not None
    assert (fc.at, fc.since, fc.panic_until) == (95.0 + shift, -50.0 + shift, 110.0 + shift)
    assert fc.needs == ((80.0 + shift, 2), (95.0 + shift, 3))
    assert fc.recent == ((90.0 + shift, 48_000.0), (95.0 + shift, 52_000.0))
    assert (fc.level, fc.trend, fc.slo_scale, fc.weight) == (50_000.0, 12.5, 0.7, 0.9)
    assert (fc.requests, fc.size_tokens, fc.size_requests) == (3.5, 49_000.0, 3.2)


def test_windows_that_must_be_watched_without_a_gap_start_again() -> None:
    data = through_json(ScalerState(units=(("both", UNIT),)), now=100.0, wall=1000.0)
    got = m.restore(data, now=0.0, wall=1001.0, forecast_window_s=None)[0].of("both")
    assert (got.high_since, got.low_since, got.idle_since) == (None, None, None)


def test_after_a_gap_of_a_forecast_window_the_forecast_starts_cold() -> None:
    data = through_json(ScalerState(units=(("both", UNIT),)), now=100.0, wall=1000.0)
    kept = m.restore(data, now=0.0, wall=1000.0 + 119.0, forecast_window_s=120.0)[0].of("both")
    cold = m.restore(data, now=0.0, wall=1000.0 + 120.0, forecast_window_s=120.0)[0].of("both")
    assert kept.forecast is not None
    assert cold.forecast is None
    assert cold.last_scale_at == kept.last_scale_at - 1.0


def test_a_restored_forecast_is_warm_at_the_first_reading() -> None:
    """What the memory is for: a cold forecast only reacts for a whole window after every restart."""
    fc = ForecastConfig(replica_prompt_tps=20_000.0, window_s=120.0)
    config = replace(aggregated(), forecast=fc, ttft_slo_s=2.0)
    unit = config.units[0]
    snap = ScalingSnapshot(now=7.0, demand=Demand(requests_per_s=5.0, prompt_tps=50_000.0))
    data = through_json(ScalerState(units=(("both", UNIT),)), now=100.0, wall=1000.0)
    restored = m.restore(data, now=0.0, wall=1010.0, forecast_window_s=fc.window_s)[0].of("both").forecast
    warm = outlook(snap, unit, 2, config, restored)
    cold = outlook(snap, unit, 2, config, None)
    assert warm is not None and cold is not None
    assert warm[0].warm and not cold[0].warm
    assert warm[0].headroom == pytest.approx(fc.headroom * 0.7)  # the learned SLO headroom is kept


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ({"version": 99}, "version 99"),
        ([1, 2], "version None"),
        ({"version": 1, "saved_at": 1.0, "saved_wall": 2000.0, "units": {}}, "in the future"),
        ({"version": 1, "saved_at": 1.0, "units": {}}, "unreadable"),
        ({"version": 1, "saved_at": 1.0, "saved_wall": 1.0, "units": {"both": {"cooldown": 1}}}, "unknown"),
        ({"version": 1, "saved_at": 1.0, "saved_wall": 1.0, "units": {"both": {"needs": "x"}}}, "unknown"),
        (
            {"version": 1, "saved_at": 1, "saved_wall": 999, "units": {"both": {"forecast": {"at": "soon"}}}},
            "unreadable",
        ),
        (
            {
                "version": 1,
                "saved_at": 1,
                "saved_wall": 999,
                "units": {"both": {"forecast": {"at": None, "since": 1, "level": 1.0}}},
            },
            "unreadable",
        ),
    ],
)
def test_a_record_it_cannot_read_is_refused(data: object, says: str) -> None:
    with pytest.raises(m.BadMemory, match=says):
        m.restore(data, now=0.0, wall=1000.0, forecast_window_s=120.0)


def test_every_field_of_the_memory_is_classified() -> None:
    """A new memory field must be placed: a time (moved), watched (dropped), a series, or a plain value."""
    plain_unit = {"pending", "forecast"}
    plain_forecast = {"level", "trend", "slo_scale", "weight", "requests", "size_tokens", "size_requests"}
    unit = set(m.UNIT_TIMES) | set(m.UNIT_WATCHED) | {"recommendations"} | plain_unit
    forecast = set(m.FORECAST_TIMES) | {"needs", "recent"} | plain_forecast
    assert {f.name for f in fields(UnitState)} == unit
    assert {f.name for f in fields(ForecastState)} == forecast


def test_recent_start_ups_ride_along_and_a_record_without_them_reads_as_none() -> None:
    data = through_json(ScalerState(), now=1.0, wall=1.0)
    assert m.startups(data) == {}
    with_times = m.record(ScalerState(), 1.0, 1.0, {"both": (40.0, 95.0)})
    assert m.startups(json.loads(json.dumps(with_times))) == {"both": (40.0, 95.0)}
    assert m.startups({"startups": {"both": ["slow"]}}) == {} and m.startups(None) == {}
