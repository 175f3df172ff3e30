"""A run's lead-in warms the fleet up and is not measured: its requests, GPU time, replicas and scale events
are left out; and an autoscaling day started with the evening before it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from infctl.autoscaler.settings import PolicyConfig, UnitConfig
from infctl.bench.config import LoadPlan, Stage
from infctl.bench.workloads import LengthDist, RandomSpec
from infctl.errors import ConfigError
from infctl.sim.cluster import AutoscaleSettings, SimConfig, simulate
from infctl.sim.cluster.scenarios.autoscaling import compressed_day, lead_in
from infctl.sim.cluster.scenarios.catalog import ScenarioSize
from infctl.sim.cluster.scenarios.diurnal import diurnal_plan
from infctl.sim.profiles import get_profile

SMALL = RandomSpec(input=LengthDist(mean=2048), output=LengthDist(mean=8))


def two_stages(lead: int) -> SimConfig:
    """A busy first 20 s (to warm up) then a quiet 20 s, on an autoscaled fleet of 1 to 4."""
    stages = [Stage(rate=60, duration_s=20), Stage(rate=2, duration_s=20)]
    policy = PolicyConfig(
        units=(UnitConfig("both", 1, 4),), queue_up=1, queue_down=0.5, up_window_s=0, up_cooldown_s=0,
        down_window_s=300,
    )  # fmt: skip
    return SimConfig(
        workload=SMALL,
        load=LoadPlan(stages=stages),
        profile=get_profile("llama3-8b-h100"),
        engines=1,
        autoscale=AutoscaleSettings(policy=policy, interval_s=2, startup_s=1),
        lead_in_stages=lead,
    )


def test_a_lead_in_is_warm_up_not_measurement() -> None:
    whole, measured = simulate(two_stages(0)), simulate(two_stages(1))
    assert whole.bench.summary.total > 500 and measured.bench.summary.total < 80  # the quiet stage's only
    assert all(r.stage == 1 and r.sent_s >= 20 for r in measured.bench.requests)
    assert measured.replicas[0].t == 20 and measured.replicas[0].desired > 1  # the busy stage scaled it out
    assert all(e.t >= 20 for e in measured.scale_events) and whole.scale_events[0].t < 20
    # GPU time from 20 s on only: the engines the busy stage added are still up (a 300 s down window).
    assert measured.gpu_hours < whole.gpu_hours
    assert measured.gpu_hours * 3600 >= 20 * measured.replicas[0].desired * 0.99


@pytest.mark.parametrize("lead", [-1, 2])
def test_a_lead_in_must_leave_a_stage_to_measure(lead: int) -> None:
    with pytest.raises(ConfigError, match="lead_in_stages"):
        two_stages(lead)


def test_a_lead_in_stage_needs_a_duration() -> None:
    cfg = two_stages(0)
    load = LoadPlan(stages=[Stage(rate=10, num_requests=20), Stage(rate=2, duration_s=5)])
    with pytest.raises(ConfigError, match="duration_s"):
        replace(cfg, load=load, lead_in_stages=1)


def test_a_day_starts_with_the_evening_before() -> None:
    day = compressed_day("business", ScenarioSize(lead_in_h=2))
    plain = compressed_day("business", ScenarioSize())
    hour = plain.day_s / 24
    stages = day.base.load.stages
    assert day.base.lead_in_stages == 2 and day.base.measured_from_s == pytest.approx(2 * hour)
    assert stages[2:] == plain.base.load.stages  # the day itself is unchanged
    assert stages[:2] == plain.base.load.stages[-2:]  # 22:00 to midnight, as the day ends
    with pytest.raises(ConfigError, match="does not end on one of the day's ramps"):
        lead_in(diurnal_plan("business", 10.0, 2400.0).stages, 150.0)  # 1.5 hours
    with pytest.raises(ConfigError, match="lead-in 13 h"):
        ScenarioSize(lead_in_h=13)
