"""The local plan when the autoscaler is enabled: control port, reserve engines, the autoscaler's command;
and which slots runtime scaling starts and stops."""

from __future__ import annotations

import json
from typing import Any

from test_plan import PY, flag, plan_of, profile

from infctl.local import LocalPlan
from infctl.local.scaling import deployed, moves, plan_slots


def scaled(**changes: Any) -> Any:
    return profile(**{"autoscaler.enabled": True, "router.enabled": True, **changes})


def test_aggregated_reserve_runs_up_to_the_max_with_ports_after_the_daemons() -> None:
    plan = plan_of(scaled(**{"autoscaler.both": {"min": 1, "max": 4}}))
    assert [s.kind for s in plan.specs] == ["engine", "engine", "router", "autoscaler"]
    assert plan.control_port == 18002
    assert [s.name for s in plan.reserve] == ["engine-2", "engine-3"]
    assert [s.port for s in plan.reserve] == [18005, 18006]
    assert LocalPlan.from_dict(json.loads(json.dumps(plan.to_dict()))) == plan


def test_the_autoscaler_reaches_the_supervisor_and_runs_on_the_simulated_clock() -> None:
    plan = plan_of(scaled(**{"autoscaler.both": {"min": 1, "max": 4}}))
    scaler = plan.specs[-1]
    assert scaler.argv[:4] == (PY, "-m", "infctl", "autoscaler")
    assert flag(scaler, "--control-url") == "http://127.0.0.1:18002"
    assert flag(scaler, "--time-scale") == "0.1"  # the profile's sim runs ten times faster
    assert flag(scaler, "--port") == str(scaler.port) and scaler.health_path == "/health"
    layout = json.loads(flag(scaler, "--layout"))
    assert layout["mode"] == "aggregated" and layout["settings"]["both"] == {"min": 1, "max": 4}


def test_the_autoscaler_keeps_its_memory_in_the_release_directory(tmp_path: Any) -> None:
    plan = plan_of(scaled(**{"autoscaler.both": {"min": 1, "max": 4}}), run_dir=tmp_path)
    memory = flag(plan.specs[-1], "--memory-file")
    assert memory == str(tmp_path / plan.release / "autoscaler-memory.json")  # removed with it by delete


def test_group_mode_reserves_whole_groups() -> None:
    p = scaled(
        mode="group",
        replicas=None,
        group={"prefill": 1, "decode": 2},
        **{"autoscaler.prefill": {"min": 1, "max": 2}},
    )
    plan = plan_of(p)
    assert [s.name for s in plan.reserve] == [
        "engine-g1-prefill-0",
        "engine-g1-decode-0",
        "engine-g1-decode-1",
    ]
    slots = plan_slots(plan)
    assert list(slots) == ["group"] and [s.name for s in slots["group"]] == ["g0", "g1"]
    assert [m.role for m in slots["group"][1].members] == ["prefill", "decode", "decode"]
    assert deployed(plan) == {"g0"}


def test_without_the_autoscaler_nothing_is_reserved() -> None:
    plan = plan_of(profile())
    assert plan.reserve == () and plan.control_port is None


def test_moves_start_the_first_idle_slots_and_stop_the_last_active_ones() -> None:
    plan = plan_of(scaled(replicas=1, **{"autoscaler.both": {"min": 1, "max": 4}}))
    slots = plan_slots(plan)["both"]
    names = [s.name for s in slots]
    assert names == ["engine-0", "engine-1", "engine-2", "engine-3"]
    start, stop = moves(slots, active={"engine-0"}, busy={"engine-1"}, desired=3)
    assert ([s.name for s in start], stop) == (["engine-2", "engine-3"], [])
    start, stop = moves(slots, active=set(names), busy=set(), desired=1)
    assert (start, [s.name for s in stop]) == ([], ["engine-3", "engine-2", "engine-1"])
