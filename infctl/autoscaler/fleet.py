"""What an actuator reports and does: the /scale view of every unit, and scaling it.

Two actuators implement :class:`Actuator`: :class:`~infctl.autoscaler.local.LocalActuator` (the local
supervisor's control endpoint) and :class:`~infctl.autoscaler.kube.KubeActuator` (the ``/scale``
subresource of Deployments, StatefulSets, LeaderWorkerSets and RBG scaling adapters).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from infctl.autoscaler.snapshot import UnitStatus


@dataclass(frozen=True, slots=True)
class ReplicaInfo:
    """One engine replica the actuator knows of."""

    name: str
    url: str
    role: str
    group: str | None = None
    ready: bool = True
    pool: str | None = None
    """The length pool it serves, else None."""


@dataclass(frozen=True)
class Fleet:
    """One observation of the actuator's side."""

    units: Mapping[str, UnitStatus]
    replicas: tuple[ReplicaInfo, ...] = ()
    """Replicas to scrape directly; empty when signals come from elsewhere (Prometheus)."""
    router_url: str | None = None
    """The router in front of them, when the actuator knows it."""
    notes: tuple[str, ...] = field(default=())
    """Anything worth logging (a unit the actuator could not read, say)."""


class Actuator(Protocol):
    async def observe(self) -> Fleet: ...

    async def scale(self, unit: str, replicas: int) -> None: ...
