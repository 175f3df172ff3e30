"""The local target honours a profile's scale-to-zero: the router holds requests while the engines are at
zero, the supervised autoscaler's unit may go to 0 after the idle window (on the engines' clock), and the
supervisor can stop the last engine."""

from __future__ import annotations

from typing import Any

from test_plan import flag, plan_of, profile

from infctl.autoscaler.profile import Layout, policy_config, unit_configs
from infctl.autoscaler.setup import Options, build
from infctl.local.scaling import moves, plan_slots

ZERO = {"autoscaler.both": {"min": 0, "max": 3}, "autoscaler.scale_to_zero": {"after_s": 600, "hold_s": 90}}


def zeroed(**changes: Any) -> Any:
    return profile(**{"autoscaler.enabled": True, "router.enabled": True, **ZERO, **changes})


def test_the_router_holds_requests_for_an_engine_to_start() -> None:
    router = next(s for s in plan_of(zeroed()).specs if s.kind == "router")
    assert flag(router, "--hold-when-empty") == "90s"
    plain = zeroed(**{"autoscaler.both": {"min": 1, "max": 3}, "autoscaler.scale_to_zero": None})
    assert "--hold-when-empty" not in next(s for s in plan_of(plain).specs if s.kind == "router").argv


def test_the_supervised_autoscaler_may_take_the_unit_to_zero_after_the_window() -> None:
    plan = plan_of(zeroed())
    scaler = next(s for s in plan.specs if s.kind == "autoscaler")
    layout = Layout.from_json(flag(scaler, "--layout"))
    (unit,) = unit_configs(layout)
    assert (unit.name, unit.min, unit.max, unit.scale_to_zero_after_s) == ("both", 0, 3, 600.0)
    # The daemon runs on the simulated engines' clock (ten times faster here): the window shrinks with it.
    policy = policy_config(layout).scaled(float(flag(scaler, "--time-scale")))
    assert policy.unit("both").scale_to_zero_after_s == 60.0
    # Start-ups are checked against the router's hold, in wall seconds as the router holds.
    opts = Options(layout=flag(scaler, "--layout"), local="http://127.0.0.1:9", time_scale=0.1, port=None)
    assert build(opts)[0].hold_when_empty_s == 90.0
    # The reserve reaches the max, and the supervisor stops every engine when asked for 0.
    assert [s.name for s in plan.reserve] == ["engine-2"]
    slots = plan_slots(plan)["both"]
    start, stop = moves(slots, {"engine-0", "engine-1"}, set(), 0)
    assert start == [] and [s.name for s in stop] == ["engine-1", "engine-0"]
