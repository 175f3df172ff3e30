"""benchmarks/bench_autoscale_local.py's pure parts: the day it sends (``simulate compare autoscaling``'s,
sized to the wall minutes asked for), the arms it runs and the local profile and router flags of each. The
benchmark itself takes minutes and is never run by tests."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from infctl.autoscaler.settings import PolicyConfig
from infctl.bench.fleet_time import plan_seconds
from infctl.local import LocalPlan, ProcessSpec
from infctl.sim.cluster.admission import AdmissionSettings

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    sys.path.insert(0, str(BENCH))
    try:
        import bench_autoscale_local as module
    finally:
        sys.path.remove(str(BENCH))
    return module


def args(**kw: object) -> argparse.Namespace:
    base = {"day": "business", "minutes": 3.0, "engines": 4, "zero": False, "sim_profile": "llama3-8b-h100",
            "speedup": 1.0, "seed": 0, "base_port": 23300}  # fmt: skip
    return argparse.Namespace(**{**base, **kw})


@pytest.mark.parametrize(("minutes", "speedup"), [(3.0, 1.0), (2.0, 0.5)])
def test_the_day_lasts_the_minutes_asked_for_on_the_engines_clock(
    bench: ModuleType, minutes: float, speedup: float
) -> None:
    sc = bench.day_scenario(args(minutes=minutes, speedup=speedup))
    # Sized by its request count, so within one request's worth of the peak-relative rate.
    assert plan_seconds(sc.base.load) == pytest.approx(minutes * 60 * speedup, rel=0.01)
    rates = [s.rate for s in sc.base.load.stages]
    assert max(rates) > 5 * min(rates)  # a day: rising and falling demand


def test_the_arms_are_the_static_fleet_and_infctls_policy(bench: ModuleType) -> None:
    sc = bench.day_scenario(args())
    static, infctl = sc.arms
    assert static.label == "static 4" and "autoscale" not in static.changes
    policy = infctl.changes["autoscale"].policy
    assert isinstance(policy, PolicyConfig) and policy.forecast is not None
    assert (policy.unit("both").min, policy.unit("both").max) == (1, 4)
    zero = bench.day_scenario(args(zero=True))
    assert [a.changes["autoscale"].policy.unit("both").min for a in zero.arms[1:]] == [1, 0]


def test_each_arm_runs_its_first_engines_with_a_reserve_to_its_max(bench: ModuleType, tmp_path: Path) -> None:
    sc = bench.day_scenario(args())
    static, infctl = (yaml.safe_load(bench.profile_text(sc.base, a, args(), tmp_path)) for a in sc.arms)
    assert (static["replicas"], static["autoscaler"]["both"]["max"]) == (4, 4)
    assert infctl["replicas"] == sc.arms[1].changes["engines"]  # the day's first hour
    assert infctl["autoscaler"]["both"]["max"] == 4
    assert infctl["model"]["sim"] == {"profile": "llama3-8b-h100", "speedup": 1.0}


def test_router_flags_mirror_the_simulated_admission(bench: ModuleType) -> None:
    assert bench.router_flags(None, 1.0) == ["--admission-queue", "0"]
    flags = bench.router_flags(AdmissionSettings(queue=64, deadline_s=40, hold_when_empty_s=9), 0.5)
    assert flags[flags.index("--hold-when-empty") + 1] == "18s"  # simulated seconds at half speed
    assert flags[flags.index("--admission-queue") + 1] == "64"


def test_engines_the_autoscaler_adds_wait_out_the_days_start_up(bench: ModuleType) -> None:
    engine = ProcessSpec(name="engine-1", kind="engine", argv=("python", "-m", "infctl", "sim"), port=9)
    first = ProcessSpec(name="engine-0", kind="engine", argv=("python", "-m", "infctl", "sim"), port=8)
    plan = LocalPlan(release="r", run_dir=Path("/tmp"), model="m", specs=(first,), reserve=(engine,))
    delayed = bench.with_start_up(plan, 6.0)
    assert delayed.specs == plan.specs  # the day's first engines are up before it starts
    (spec,) = delayed.reserve
    assert spec.argv[:3] == ("sh", "-c", 'sleep 6 && exec "$0" "$@"') and spec.argv[3:] == engine.argv


def test_the_zero_day_says_whether_its_night_outlasts_the_idle_window(bench: ModuleType) -> None:
    short, long_ = (bench.day_scenario(args(zero=True, minutes=m)) for m in (2.0, 10.0))
    assert bench.idle_window(short) == bench.idle_window(long_) == 60.0  # 15 minutes at the 1/15 floor
    assert bench.quiet_seconds(short) == pytest.approx(2 * 60 * 5 / 24, rel=0.01)  # 00:00-05:00
    assert bench.quiet_seconds(long_) > 2 * bench.idle_window(long_)
    assert bench.idle_window(bench.day_scenario(args())) is None
