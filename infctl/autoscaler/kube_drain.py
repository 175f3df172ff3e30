"""Scale-in on Kubernetes without cutting streams: pick the pods that will go, drain them, then scale.

A controller chooses which pods a scale-in removes, so the autoscaler makes the choice for it and drains
those pods first, as the local supervisor drains the engines it stops:

1. :func:`victims`: the pods the scale-in will remove. A LeaderWorkerSet removes its highest group indexes
   (its leaders are a StatefulSet); a Deployment's ReplicaSet removes unready pods first, then those of the
   lowest ``controller.kubernetes.io/pod-deletion-cost``: so the autoscaler picks unready pods, then the
   least busy ones, and gives them the lowest cost.
2. Each victim is annotated ``infctl.io/draining: "true"``: every router replica watching the pods stops
   sending it new requests (``infctl.router.discovery``), where a drain through one router's admin API
   would reach one replica only.
3. The victims' engines are polled (their own /metrics: requests running + waiting) until idle, at most
   ``timeout_s``; then the workload is scaled. The engines' preStop hook still waits for anything left
   (``infctl.manifests.drain``), so a timed-out drain is no worse than no drain.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import httpx

from infctl.errors import MetricsError
from infctl.manifests import labels as L
from infctl.telemetry import MetricsSource, scrape

if TYPE_CHECKING:
    from infctl.kube import KubeClient

log = logging.getLogger(__name__)

LWS_NAME = "leaderworkerset.sigs.k8s.io/name"
LWS_GROUP = "leaderworkerset.sigs.k8s.io/group-index"
LWS_WORKER = "leaderworkerset.sigs.k8s.io/worker-index"
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
"""A ReplicaSet deletes ready pods of lower cost first (Kubernetes 1.22+)."""
FIRST_TO_GO = "-1000000"


@dataclass(frozen=True, slots=True)
class PodView:
    """What the choice of victims needs of a pod."""

    name: str
    url: str | None
    """The engine's base URL (pod IP and its ``http`` port); None for LWS workers and pods with no IP."""
    ready: bool
    group_index: int | None = None
    """LeaderWorkerSet group index (leaders only); None for Deployment pods."""


def pod_view(pod: Mapping[str, Any], default_port: int = 8000) -> PodView:
    """A pod as :func:`victims` sees it."""
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    labels = meta.get("labels") or {}
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or ()
    )
    ip = status.get("podIP")
    serves = labels.get(L.SERVES) == "http" and bool(ip)
    port = next(
        (
            p.get("containerPort")
            for c in (pod.get("spec") or {}).get("containers") or ()
            for p in c.get("ports") or ()
            if p.get("name") == "http"
        ),
        default_port,
    )
    host = f"[{ip}]" if ip and ":" in ip else ip
    group = labels.get(LWS_GROUP)
    return PodView(
        name=str(meta.get("name")),
        url=f"http://{host}:{port}" if serves else None,
        ready=ready and not meta.get("deletionTimestamp"),
        group_index=int(group) if group is not None and str(group).isdigit() else None,
    )


def victims(
    kind: str, pods: Sequence[PodView], desired: int, busy: Mapping[str, float] | None = None
) -> list[PodView]:
    """The pods a scale-in to ``desired`` replicas removes (see the module docs); ``busy``: requests on
    each pod's engine, by pod name (unknown counts as busy)."""
    if kind == "LeaderWorkerSet":
        return sorted(
            (p for p in pods if p.group_index is not None and p.group_index >= desired),
            key=lambda p: p.group_index or 0,
        )
    extra = len(pods) - desired
    if extra <= 0:
        return []
    load = busy or {}
    ranked = sorted(pods, key=lambda p: (p.ready, load.get(p.name, float("inf")), p.name))
    return ranked[:extra]


class PodAPI(Protocol):
    async def pods(self, kind: str, name: str) -> list[dict[str, Any]]: ...

    async def annotate(self, pod: str, annotations: Mapping[str, str]) -> None: ...


@dataclass
class KubeDrainer:
    """Drains the pods a scale-in removes before it happens (the module docs)."""

    api: PodAPI
    client: httpx.AsyncClient
    adapter: MetricsSource
    """The engine's metrics (requests running and waiting)."""
    timeout_s: float = 600.0
    """Longest wait for the victims' requests to finish before scaling anyway."""
    interval_s: float = 1.0

    async def before_scale_in(self, kind: str, name: str, desired: int) -> list[str]:
        """Drain the pods a scale-in of ``kind/name`` to ``desired`` removes; their names."""
        pods = [pod_view(p) for p in await self.api.pods(kind, name)]
        if kind == "LeaderWorkerSet":
            pods = [p for p in pods if p.url is not None]  # leaders: a group goes with its leader
        busy = await self._busy([p for p in pods if p.url is not None])
        chosen = victims(kind, pods, desired, busy)
        marks = {L.DRAINING: "true"}
        if kind == "Deployment":
            marks[DELETION_COST] = FIRST_TO_GO
        for p in chosen:
            await self.api.annotate(p.name, marks)
        serving = [p for p in chosen if p.url is not None and p.ready]
        if serving and not await self._wait_idle(serving):
            left = "%s/%s: requests still in flight after %.0f s; scaling in anyway"
            log.warning(left, kind, name, self.timeout_s)
        return [p.name for p in chosen]

    async def _busy(self, pods: Sequence[PodView]) -> dict[str, float]:
        out: dict[str, float] = {}
        for p in pods:
            assert p.url is not None
            try:
                sig = await scrape(self.client, p.url, self.adapter)
            except MetricsError:
                continue  # unknown: counted as busy, so a pod that answers is preferred
            out[p.name] = sig.queue + sig.running
        return out

    async def _wait_idle(self, pods: Sequence[PodView]) -> bool:
        """Until every engine has nothing running or waiting twice in a row (a request between two reads
        would show); an engine that stops answering has nothing left to wait for."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        calm: dict[str, int] = {p.name: 0 for p in pods}
        while True:
            for p in pods:
                assert p.url is not None
                try:
                    sig = await scrape(self.client, p.url, self.adapter)
                    idle = sig.queue + sig.running == 0
                except MetricsError:
                    idle = True
                calm[p.name] = calm[p.name] + 1 if idle else 0
            if all(n >= 2 for n in calm.values()):
                return True
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(self.interval_s)


class KubePodAPI:
    """:class:`PodAPI` over :mod:`infctl.kube` (its blocking client runs in a worker thread)."""

    def __init__(self, client: KubeClient, namespace: str | None = None) -> None:
        self.client, self.namespace = client, namespace or client.namespace

    async def pods(self, kind: str, name: str) -> list[dict[str, Any]]:
        """The workload's pods: a Deployment's by its selector, a LeaderWorkerSet's by its name label."""
        if kind == "LeaderWorkerSet":
            selector = f"{LWS_NAME}={name}"
        else:
            path = f"/apis/apps/v1/namespaces/{self.namespace}/deployments/{name}"
            obj = await asyncio.to_thread(self.client.request, "GET", path)
            match = ((obj.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
            selector = ",".join(f"{k}={v}" for k, v in sorted(match.items()))
        listed = await asyncio.to_thread(
            self.client.request,
            "GET",
            f"/api/v1/namespaces/{self.namespace}/pods",
            query={"labelSelector": selector},
        )
        items: list[dict[str, Any]] = listed.get("items") or []
        return items

    async def annotate(self, pod: str, annotations: Mapping[str, str]) -> None:
        from infctl.kube.client import MERGE_PATCH

        body = {"metadata": {"annotations": dict(annotations)}}
        path = f"/api/v1/namespaces/{self.namespace}/pods/{pod}"
        await asyncio.to_thread(self.client.request, "PATCH", path, body=body, content_type=MERGE_PATCH)
