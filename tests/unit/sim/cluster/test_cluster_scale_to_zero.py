"""Scale-to-zero on the virtual clock: the autoscaler's pure policy (min 0, an idle window) takes the fleet
to 0 over a night without traffic; the first morning request waits in the router's admission queue
(``hold_when_empty_s``), wakes the fleet through the router's queue, and is served once an engine has
started: its TTFT includes the start-up."""

from __future__ import annotations

from dataclasses import replace

from infctl.autoscaler.settings import PolicyConfig, UnitConfig
from infctl.bench.config import LoadPlan, Stage
from infctl.bench.workloads import LengthDist, RandomSpec, build_workload
from infctl.sim.cluster import AutoscaleSettings, SimConfig
from infctl.sim.cluster.admission import AdmissionSettings
from infctl.sim.cluster.engine_loop import Simulation
from infctl.sim.cluster.prompts import prompt_source
from infctl.sim.cluster.scenarios import ScenarioSize, build_scenarios
from infctl.sim.cluster.scenarios.diurnal import SHAPES, diurnal_plan

STARTUP_S, IDLE_S, NIGHT_S = 20.0, 60.0, 600.0
SMALL = RandomSpec(input=LengthDist(mean=200), output=LengthDist(mean=8))
# A day, a night whose only request comes at dusk (a ramp to 0 sends its first request at once, then
# none), a morning.
DAY = LoadPlan(
    stages=[
        Stage(rate=2, duration_s=60),
        Stage(rate=1e-6, rate_end=0, duration_s=NIGHT_S),
        Stage(rate=2, duration_s=90),
    ]
)


def run(*, hold_s: float, min_engines: int = 0) -> Simulation:
    window = IDLE_S if min_engines == 0 else None
    unit = UnitConfig("both", min=min_engines, max=4, scale_to_zero_after_s=window)
    policy = PolicyConfig(units=(unit,), down_window_s=30, down_cooldown_s=10)
    cfg = SimConfig(
        workload=SMALL,
        load=DAY,
        engines=1,
        policy="least_load",
        autoscale=AutoscaleSettings(policy=policy, interval_s=5.0, startup_s=STARTUP_S),
        admission=AdmissionSettings(queue=64, deadline_s=30, hold_when_empty_s=hold_s),
    )
    sim = Simulation(cfg, prompt_source(build_workload(cfg.workload, cfg.api, cfg.seed)))
    sim.run()
    return sim


def test_the_fleet_sleeps_through_the_night_and_the_first_morning_request_waits_for_an_engine() -> None:
    sim = run(hold_s=60.0)
    assert sim.scaler is not None
    morning_at = 60 + NIGHT_S
    zero = [p for p in sim.replicas if p.desired == 0]
    assert zero and 60 + IDLE_S <= zero[0].t < morning_at  # only after the idle window, within the night
    woke = [e for e in sim.scaler.events if e.current == 0 and e.desired == 1]
    assert woke and woke[0].t >= morning_at and "held by the router" in woke[0].reason
    records = sorted(sim.records, key=lambda r: r.sent_s)
    assert all(r.ok for r in records), [r.error_detail for r in records if not r.ok][:3]
    first = next(r for r in records if r.stage == 2)
    ttft = first.chunk_times[0] - first.sent_s
    assert ttft >= STARTUP_S  # held in the router while an engine started
    later = [
        r.chunk_times[0] - r.sent_s for r in records if r.stage == 2 and r.sent_s > woke[0].t + STARTUP_S + 10
    ]
    assert later and max(later) < STARTUP_S  # once awake, no more waiting for start-up


def test_without_holding_the_morning_request_is_a_503_and_without_min_zero_no_sleep() -> None:
    sim = run(hold_s=0.0)
    first = min((r for r in sim.records if r.stage == 2), key=lambda r: r.sent_s)
    assert first.status == 503
    awake = run(hold_s=60.0, min_engines=1)
    assert min(p.desired for p in awake.replicas) == 1
    assert all(r.ok for r in awake.records)


def test_the_night_day_is_silent_until_five_and_the_other_days_keep_their_stages() -> None:
    night = diurnal_plan("night", 10.0, 2400.0)
    quiet = night.stages[0]
    assert quiet.duration_s == 500.0 and quiet.rate is not None and quiet.rate * quiet.duration_s < 1e-5
    business = diurnal_plan("business", 10.0, 2400.0)
    assert [s.rate for s in business.stages] == [10.0 * x for x in SHAPES["business"]]


def test_the_scale_to_zero_comparison_differs_from_its_floor_of_one_only_in_min() -> None:
    sc = build_scenarios(["scale-to-zero"], ScenarioSize(requests=200))[0]
    static, one, zero = (arm.config(sc.base) for arm in sc.arms)
    assert static.autoscale is None and one.autoscale is not None and zero.autoscale is not None
    assert isinstance(one.autoscale.policy, PolicyConfig) and isinstance(zero.autoscale.policy, PolicyConfig)
    lo, hi = one.autoscale.policy.units[0], zero.autoscale.policy.units[0]
    assert (lo.min, lo.scale_to_zero_after_s) == (1, None) and hi.min == 0 and hi.scale_to_zero_after_s
    assert replace(zero.autoscale.policy, units=(lo,)) == one.autoscale.policy
    assert zero.admission == one.admission and zero.admission is not None
    assert zero.admission.hold_when_empty_s > zero.autoscale.startup_s + zero.autoscale.interval_s
    days = {s.name for s in build_scenarios(["autoscaling"], ScenarioSize(requests=200))}
    assert "scale-to-zero" not in days  # compare autoscaling's days are unchanged
