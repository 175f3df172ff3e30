"""A unit's load in totals, so it can be projected onto any count of units (pure).

Per-replica signals are averaged over the ready replicas that reported, then multiplied back by the ready
replica count: a missed scrape does not read as spare capacity. The router's admission queue is added to
the entry role's total. Projected onto ``n`` units, a role's per-replica load is ``total / (n * per_unit)``,
which is how the policy knows how many units the load needs and never scales down into a scale-up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from infctl.autoscaler.settings import PolicyConfig, UnitConfig
from infctl.autoscaler.snapshot import ScalingSnapshot

_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class RoleLoad:
    role: str
    per_unit: int
    """Replicas of this role in one unit."""
    queue: float
    """Waiting requests in total (engines' queues, plus the router's for the entry role)."""
    kv: float
    """KV usage summed over replicas (1.0 = one full replica's cache)."""


@dataclass(frozen=True, slots=True)
class UnitLoad:
    roles: tuple[RoleLoad, ...]
    """Empty when no ready replica of the unit reported signals."""

    @property
    def known(self) -> bool:
        return bool(self.roles)

    def queue_per_replica(self, units: int) -> float:
        """The busiest role's waiting requests per replica with ``units`` units."""
        return max((r.queue / (max(units, 1) * r.per_unit) for r in self.roles), default=0.0)

    def kv_usage(self, units: int) -> float:
        """The busiest role's mean KV usage with ``units`` units."""
        return max((r.kv / (max(units, 1) * r.per_unit) for r in self.roles), default=0.0)

    def needed(self, config: PolicyConfig, entry_queue_up: float | None = None) -> int:
        """Fewest units that keep every role at or under both scale-up thresholds (at least 1);
        ``entry_queue_up``: the entry role's queue threshold instead of ``queue_up`` (the forecast's drain
        rule, :func:`~infctl.autoscaler.forecast.drain_queue_up`)."""
        need = 1
        for r in self.roles:
            up = config.queue_up if entry_queue_up is None or r.role != config.entry_role else entry_queue_up
            units = max(r.queue / up, r.kv / config.kv_up) / r.per_unit
            need = max(need, math.ceil(units - _EPS))
        return need

    def is_low(self, units: int, config: PolicyConfig) -> bool:
        return self.queue_per_replica(units) < config.queue_down and self.kv_usage(units) < config.kv_down


def unit_load(
    snapshot: ScalingSnapshot, unit: UnitConfig, ready_units: int, config: PolicyConfig
) -> UnitLoad:
    """``unit``'s load from the snapshot, with ``ready_units`` units of capacity."""
    roles = []
    for role, per_unit in unit.members:
        seen = [
            r
            for r in snapshot.replicas
            if r.role == role
            and r.ready
            and (unit.group is None or r.group == unit.group)
            and (unit.pool is None or r.pool == unit.pool)
        ]
        if not seen:
            continue
        replicas = max(ready_units * per_unit, len(seen))
        queue = sum(r.queue for r in seen) / len(seen) * replicas
        kv = sum(r.kv_usage for r in seen) / len(seen) * replicas
        if role == config.entry_role:
            queue += snapshot.router_queue
        roles.append(RoleLoad(role=role, per_unit=per_unit, queue=queue, kv=kv))
    return UnitLoad(roles=tuple(roles))
