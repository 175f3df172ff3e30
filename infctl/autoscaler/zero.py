"""Scale-to-zero (pure): a unit with ``min`` 0 and ``scale_to_zero_after_s`` (KEDA's idle replicas, Knative's
scale-to-zero) goes to 0 after that long idle, and back to 1 as soon as a request waits for it.

Idle means no request in the unit's ready engines (queued or running), none pending start, none held by the
router for it, and (for a unit not bound to a pool) no request routed over the last interval. With no
engine left, the engines' metrics are gone: demand shows only in the router, whose admission queue holds
the first request (``hold_when_empty_s``) and exports it per pool (``infctl_router_pool_queue_depth``).
A unit bound to a pool sees its engines' in-flight requests only at each reading: the router's demand is
fleet-wide, so a pool whose rare requests start and finish between readings reads as idle.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from infctl.autoscaler.settings import UnitConfig
from infctl.autoscaler.snapshot import ScalingSnapshot, UnitState, UnitStatus


@dataclass(frozen=True, slots=True)
class ZeroStep:
    """What scale-to-zero decides for one unit: a count and why, or nothing (the usual policy decides)."""

    desired: int | None
    reason: str
    memory: UnitState


def waiting_for(snap: ScalingSnapshot, unit: UnitConfig) -> float:
    """Requests the router holds for ``unit``: those waiting for its pool, or all of them (no pool)."""
    if unit.pool is None:
        return snap.router_queue
    return sum(n for pool, n in snap.router_pool_queue if pool == unit.pool)


def is_idle(snap: ScalingSnapshot, unit: UnitConfig, status: UnitStatus) -> bool:
    """Nothing for the unit to do now (see the module docstring)."""
    if status.pending or waiting_for(snap, unit) > 0:
        return False
    if unit.pool is None and snap.demand is not None and snap.demand.requests_per_s > 0:
        return False
    mine = [
        r
        for r in snap.replicas
        if r.ready
        and r.role in unit.roles
        and (unit.group is None or r.group == unit.group)
        and (unit.pool is None or r.pool == unit.pool)
    ]
    return not any(r.queue > 0 or r.running > 0 for r in mine)


def scale_to_zero(snap: ScalingSnapshot, unit: UnitConfig, status: UnitStatus, memory: UnitState) -> ZeroStep:
    """The decision for a unit that may scale to zero (``unit.scale_to_zero_after_s`` set)."""
    after = unit.scale_to_zero_after_s
    assert after is not None
    idle = is_idle(snap, unit, status)
    since = (snap.now if memory.idle_since is None else memory.idle_since) if idle else None
    memory = replace(memory, idle_since=since)
    if status.desired == 0:
        held = waiting_for(snap, unit)
        if held > 0:
            return ZeroStep(1, f"wake from zero: {held:.0f} request(s) held by the router", memory)
        if unit.pool is None and snap.demand is not None and snap.demand.requests_per_s > 0:
            return ZeroStep(1, f"wake from zero: {snap.demand.requests_per_s:.2g} requests/s", memory)
        return ZeroStep(0, "scaled to zero: no request waits", memory)
    if since is not None and snap.now - since >= after:
        return ZeroStep(0, f"idle for {snap.now - since:.0f}s (scale to zero after {after:g}s)", memory)
    return ZeroStep(None, "", memory)
