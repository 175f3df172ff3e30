"""The Kubernetes actuator: each unit is one workload scaled through its ``/scale`` subresource.

:class:`KubeActuator` speaks to a small :class:`ScaleAPI` protocol, so it is tested with a fake and the
real thing is :class:`KubeScaleAPI` over :mod:`infctl.kube` (``scale()`` for the write, a GET of the
workload for ``spec.replicas`` and ``status.readyReplicas``). The kube layer scales Deployments and
LeaderWorkerSets today; a StatefulSet or an RBG scaling adapter needs it to learn those kinds.

With a :class:`~infctl.autoscaler.kube_drain.KubeDrainer`, a scale-in first drains the pods it will remove
(the drainer picks them for the controller and routers stop sending them requests), as the local target
drains the engines it stops; the engines' preStop hook and termination grace period cover the rest.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from infctl.autoscaler.fleet import Fleet
from infctl.autoscaler.snapshot import UnitStatus
from infctl.errors import KubeError
from infctl.manifests.kinds import lookup

if TYPE_CHECKING:
    from infctl.autoscaler.kube_drain import KubeDrainer
    from infctl.kube import KubeClient

API_VERSIONS = {"Deployment": "apps/v1", "LeaderWorkerSet": "leaderworkerset.x-k8s.io/v1"}
"""Kinds the kube layer can scale, with their API versions."""


@dataclass(frozen=True, slots=True)
class KubeTarget:
    """One scalable workload: the unit it carries, and its kind and name."""

    unit: str
    kind: str
    name: str


class ScaleAPI(Protocol):
    async def read(self, kind: str, name: str) -> UnitStatus: ...

    async def scale(self, kind: str, name: str, replicas: int) -> None: ...


class KubeScaleAPI:
    """:class:`ScaleAPI` over :mod:`infctl.kube` (its blocking client runs in a worker thread)."""

    def __init__(self, client: KubeClient, namespace: str | None = None) -> None:
        self.client, self.namespace = client, namespace or client.namespace

    async def read(self, kind: str, name: str) -> UnitStatus:
        entry = lookup(API_VERSIONS.get(kind, ""), kind)
        if entry is None:
            raise KubeError(f"cannot scale a {kind}", hint=f"scalable kinds: {', '.join(API_VERSIONS)}")
        path = entry.object_path(name, self.namespace)
        obj = await asyncio.to_thread(self.client.request, "GET", path)
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        return UnitStatus(desired=int(spec.get("replicas", 1)), ready=int(status.get("readyReplicas", 0)))

    async def scale(self, kind: str, name: str, replicas: int) -> None:
        from infctl.kube import scale

        await asyncio.to_thread(scale, self.client, kind, name, replicas, self.namespace)


class KubeActuator:
    """Units backed by Kubernetes workloads."""

    def __init__(
        self,
        targets: Sequence[KubeTarget],
        api: ScaleAPI,
        router_url: str | None = None,
        drainer: KubeDrainer | None = None,
    ) -> None:
        self.targets = {t.unit: t for t in targets}
        self.api, self.router_url, self.drainer = api, router_url, drainer

    async def observe(self) -> Fleet:
        units, notes = {}, []
        for unit, t in self.targets.items():
            try:
                units[unit] = await self.api.read(t.kind, t.name)
            except KubeError as err:
                notes.append(f"{t.kind}/{t.name}: {err.message}")
        return Fleet(units=units, router_url=self.router_url, notes=tuple(notes))

    async def scale(self, unit: str, replicas: int) -> None:
        t = self.targets[unit]
        if self.drainer is not None and replicas < (await self.api.read(t.kind, t.name)).desired:
            await self.drainer.before_scale_in(t.kind, t.name, replicas)
        await self.api.scale(t.kind, t.name, replicas)
