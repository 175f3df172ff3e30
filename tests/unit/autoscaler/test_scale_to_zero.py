"""Scale-to-zero in the pure policy, on crafted signals: 0 only after the idle window with nothing routed,
waiting or running; back to 1 as soon as the router holds a request for the unit (its engines are gone)."""

from __future__ import annotations

import pytest

from infctl.autoscaler.kubefile import parse_kube_file
from infctl.autoscaler.policy import desired_replicas
from infctl.autoscaler.settings import PolicyConfig, UnitConfig
from infctl.autoscaler.snapshot import Demand, ReplicaSignals, ScalerState, ScalingSnapshot, UnitStatus
from infctl.errors import ConfigError

IDLE = 600.0
QUIET = Demand(0.0, 0.0)


def config(pool: str | None = None) -> PolicyConfig:
    unit = UnitConfig("short", 0, 4, pool=pool, scale_to_zero_after_s=IDLE)
    return PolicyConfig(units=(unit,), down_window_s=60, down_cooldown_s=60)


def step(
    cfg: PolicyConfig, state: ScalerState, now: float, count: int, ready: int | None = None, **snap_kw: object
) -> tuple[int, str, ScalerState]:
    pool = cfg.units[0].pool
    ready = count if ready is None else ready
    replicas = tuple(
        ReplicaSignals(f"e{i}", "both", pool=pool, queue=0.0, running=float(snap_kw.pop("running", 0.0)))  # type: ignore[arg-type]
        for i in range(ready)
    )
    snap = ScalingSnapshot(now=now, replicas=replicas, **snap_kw)  # type: ignore[arg-type]
    d = desired_replicas(snap, {"short": UnitStatus(count, ready)}, cfg, state)
    rec = d.recommendations[0]
    return rec.desired, rec.reason, d.state


def test_goes_to_zero_only_after_the_idle_window() -> None:
    cfg, state = config(), ScalerState()
    n, _, state = step(cfg, state, 0.0, 1, demand=QUIET)
    assert n == 1
    n, _, state = step(cfg, state, IDLE - 15, 1, demand=QUIET)
    assert n == 1
    n, reason, state = step(cfg, state, IDLE, 1, demand=QUIET)
    assert n == 0 and "idle" in reason
    n, reason, _ = step(cfg, state, IDLE + 15, 0, demand=QUIET)
    assert n == 0 and "no request waits" in reason


@pytest.mark.parametrize(
    "busy",
    [
        {"demand": Demand(0.01, 5.0)},  # one request routed in the interval
        {"router_queue": 1.0, "demand": QUIET},  # one waiting in the router
        {"running": 1.0, "demand": QUIET},  # one running in an engine
    ],
)
def test_any_request_restarts_the_idle_window(busy: dict[str, object]) -> None:
    cfg, state = config(), ScalerState()
    _, _, state = step(cfg, state, 0.0, 1, demand=QUIET)
    _, _, state = step(cfg, state, IDLE / 2, 1, **busy)
    quiet_from = IDLE / 2 + 15  # the first reading without the request
    n, _, state = step(cfg, state, quiet_from, 1, demand=QUIET)
    n, _, state = step(cfg, state, quiet_from + IDLE - 15, 1, demand=QUIET)
    assert n == 1  # the window counts from the request, not from the first quiet reading at 0
    n, _, _ = step(cfg, state, quiet_from + IDLE, 1, demand=QUIET)
    assert n == 0


def test_a_pool_wakes_on_the_routers_queue_for_that_pool_only() -> None:
    cfg = config(pool="short")
    n, _, _ = step(cfg, ScalerState(), 0.0, 0, router_pool_queue=(("long", 3.0),))
    assert n == 0  # another pool's waiters do not wake this one
    n, reason, state = step(cfg, ScalerState(), 0.0, 0, router_pool_queue=(("short", 1.0),))
    assert n == 1 and "held by the router" in reason
    # pending: the woken replica is starting; the policy neither adds more nor goes back to 0
    n, _, _ = step(cfg, state, 15.0, 1, ready=0, router_pool_queue=(("short", 1.0),))
    assert n == 1


def test_a_fleet_wide_unit_wakes_on_routed_demand_or_the_queue() -> None:
    cfg = config()
    assert step(cfg, ScalerState(), 0.0, 0, router_queue=2.0)[0] == 1
    assert step(cfg, ScalerState(), 0.0, 0, demand=Demand(0.2, 100.0))[0] == 1
    assert step(cfg, ScalerState(), 0.0, 0, demand=QUIET)[0] == 0


def test_without_scale_to_zero_the_unit_never_goes_below_one() -> None:
    cfg = PolicyConfig(units=(UnitConfig("both", 1, 4),), down_window_s=60, down_cooldown_s=0)
    state = ScalerState()
    for t in range(0, 7200, 15):
        snap = ScalingSnapshot(now=float(t), replicas=(ReplicaSignals("e0", "both"),), demand=QUIET)
        d = desired_replicas(snap, {"both": UnitStatus(1, 1)}, cfg, state)
        state = d.state
        assert d.recommendations[0].desired == 1


def test_min_zero_and_the_idle_window_go_together() -> None:
    with pytest.raises(ConfigError, match="scale_to_zero_after_s"):
        PolicyConfig(units=(UnitConfig("both", 0, 4),))
    with pytest.raises(ConfigError, match="scale_to_zero_after_s"):
        PolicyConfig(units=(UnitConfig("both", 1, 4, scale_to_zero_after_s=60),))
    scaled = config().scaled(0.1).units[0].scale_to_zero_after_s
    assert scaled == pytest.approx(IDLE * 0.1)


def test_the_autoscaler_file_takes_min_zero_with_its_window() -> None:
    target = {"kind": "Deployment", "name": "short", "role": "both", "min": 0, "max": 4, "pool": "short"}
    kf = parse_kube_file({"targets": [{**target, "scale_to_zero_after_s": 900}]}, "autoscaler.yaml")
    assert kf.units[0].min == 0 and kf.units[0].scale_to_zero_after_s == 900
    with pytest.raises(ConfigError, match="scale_to_zero_after_s"):
        parse_kube_file({"targets": [target]}, "autoscaler.yaml")
