"""Engine-seconds of a live fleet from the supervisor's samples, and a load plan on a dilated clock."""

from __future__ import annotations

import pytest

from infctl.bench.config import LoadPlan, Stage
from infctl.bench.fleet_time import (
    FleetSample,
    engine_seconds,
    fleet_sample,
    mean_held,
    mean_start_up,
    peak_held,
    plan_seconds,
    wall_plan,
)
from infctl.errors import ConfigError


def test_a_sample_counts_ready_starting_and_stopping_engines_of_every_unit() -> None:
    body = {
        "units": {
            "both": {"desired": 3, "ready": 2, "starting": 1, "stopping": 0, "max": 4, "replicas": []},
            "decode": {"desired": 1, "ready": 0, "starting": 0, "stopping": 1, "max": 2, "replicas": []},
        }
    }
    s = fleet_sample(5.0, body)
    assert (s.t, s.ready, s.starting, s.stopping, s.held) == (5.0, 2, 1, 1, 4)


def test_engine_seconds_integrate_the_count_as_steps_within_the_window() -> None:
    samples = [FleetSample(0, 1), FleetSample(10, 3), FleetSample(20, 2, stopping=1), FleetSample(30, 1)]
    assert engine_seconds(samples, 0, 40) == 1 * 10 + 3 * 10 + 3 * 10 + 1 * 10
    assert engine_seconds(samples, 5, 25) == 1 * 5 + 3 * 10 + 3 * 5  # clipped at both ends
    assert engine_seconds(list(reversed(samples)), 0, 40) == 80  # order of arrival does not matter
    assert mean_held(samples, 0, 40) == 2.0 and peak_held(samples) == 3


def test_the_first_count_holds_before_the_first_sample_and_nothing_is_counted_outside() -> None:
    samples = [FleetSample(10, 4), FleetSample(20, 2)]
    assert engine_seconds(samples, 0, 30) == 4 * 20 + 2 * 10
    assert engine_seconds(samples, 30, 30) == 0.0 and engine_seconds([], 0, 10) == 0.0


def test_a_static_fleet_costs_its_size_times_the_window() -> None:
    samples = [FleetSample(t * 0.25, 4) for t in range(400)]
    assert engine_seconds(samples, 0, 100) == pytest.approx(400.0)


def test_start_up_is_starting_engine_seconds_per_start() -> None:
    samples = [
        FleetSample(0, 1),
        FleetSample(1, 1, starting=2),  # two engines asked for
        FleetSample(3, 2, starting=1),  # one ready after 2 s
        FleetSample(4, 3),  # the other after 3 s
    ]
    assert mean_start_up(samples) == pytest.approx((2 * 2 + 1 * 1) / 2)
    assert mean_start_up([FleetSample(0, 4), FleetSample(1, 4)]) is None


def test_a_plan_on_engines_twice_as_fast_sends_twice_the_rate_for_half_as_long() -> None:
    plan = LoadPlan(
        stages=[
            Stage(rate=2.0, rate_end=4.0, duration_s=60),
            Stage(rate=4.0, duration_s=30),
            Stage(concurrency=8, num_requests=100),
        ],
        warmup=3,
    )
    wall = wall_plan(plan, 2.0)
    assert [(s.rate, s.rate_end, s.duration_s) for s in wall.stages] == [
        (4.0, 8.0, 30.0),
        (8.0, None, 15.0),
        (None, None, None),
    ]
    assert wall.stages[2].concurrency == 8 and wall.stages[2].num_requests == 100 and wall.warmup == 3
    assert plan_seconds(plan) == 90 and plan_seconds(wall) == 45
    assert wall_plan(plan, 1.0) == plan
    with pytest.raises(ConfigError, match="speedup"):
        wall_plan(plan, 0)
