"""Runtime scaling of a local release, the pure part: units, slots, and which slots to start or stop.

An engine belongs to a *unit* (what the autoscaler counts): its role (``both``, ``prefill``, ``decode``),
``group`` in group mode, or its length pool's name for aggregated engines in length pools. A *slot* is what
starts and stops together: one engine, or every engine of a PD group. Slots keep plan order (deployed
engines, then the reserve), so scaling out starts the first idle slots and scaling in stops the last active
ones.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from infctl.local.spec import LocalPlan, ProcessSpec


@dataclass(frozen=True)
class Slot:
    name: str
    """``g2`` for a group, else the engine's name."""
    unit: str
    members: tuple[ProcessSpec, ...]


def unit_of(spec: ProcessSpec) -> str:
    """``group``; an aggregated length pool's name (each pool its own unit); else the role."""
    if spec.group is not None:
        return "group"
    if spec.role in (None, "both") and spec.pool is not None:
        return spec.pool
    return spec.role or "both"


def plan_slots(plan: LocalPlan) -> dict[str, list[Slot]]:
    """Every unit's slots in plan order, deployed engines first."""
    members: dict[str, list[ProcessSpec]] = {}
    units: dict[str, str] = {}
    for spec in (*plan.specs, *plan.reserve):
        if spec.kind != "engine":
            continue
        name = spec.group if spec.group is not None else spec.name
        members.setdefault(name, []).append(spec)
        units[name] = unit_of(spec)
    slots: dict[str, list[Slot]] = {}
    for name, specs in members.items():
        slots.setdefault(units[name], []).append(Slot(name, units[name], tuple(specs)))
    return slots


def deployed(plan: LocalPlan) -> set[str]:
    """Names of the slots the plan starts with."""
    return {s.group if s.group is not None else s.name for s in plan.specs if s.kind == "engine"}


def moves(
    slots: Sequence[Slot], active: Collection[str], busy: Collection[str], desired: int
) -> tuple[list[Slot], list[Slot]]:
    """(slots to start, slots to stop) to bring ``active`` to ``desired``; ``busy`` ones (stopping) are
    left alone."""
    on = [s for s in slots if s.name in active]
    if len(on) < desired:
        idle = [s for s in slots if s.name not in active and s.name not in busy]
        return idle[: desired - len(on)], []
    return [], list(reversed(on[desired:]))
