"""Kubernetes discovery: ready engine pods, selected by label, become backends (and leave when they go).

``backend_from_pod`` and ``reconcile`` are pure; ``discover`` runs the blocking list+watch of
``infctl.kube.watch`` in a thread and applies each change to the pool on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from infctl.manifests import labels
from infctl.router.snapshot import Backend, Role

if TYPE_CHECKING:
    from infctl.kube.client import KubeClient
    from infctl.router.server import RouterState

log = logging.getLogger(__name__)
_ROLES = ("prefill", "decode", "both")


@dataclass(frozen=True)
class DiscoverySettings:
    namespace: str
    """Namespace the engine pods run in."""
    selector: str
    """Label selector, e.g. ``infctl.io/release=ds3,app.kubernetes.io/component=engine``."""
    port: int = 8000
    """Engine HTTP port, unless the pod names a container port ``http``."""
    engine: str = "vllm"
    """Engine when the pod has no ``infctl.io/engine`` label."""


def backend_from_pod(pod: Mapping[str, Any], s: DiscoverySettings) -> Backend | None:
    """The backend a pod is, or None while it is not ready to serve (or is terminating)."""
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    ip = status.get("podIP")
    if not ip or meta.get("deletionTimestamp") or status.get("phase", "Running") != "Running":
        return None
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or ()
    )
    if not ready:
        return None
    pod_labels: Mapping[str, str] = meta.get("labels") or {}
    role = pod_labels.get(labels.ROLE, "both")
    url = f"http://{ip}:{_http_port(pod, s.port)}"
    return Backend(
        id=url,
        url=url,
        role=cast(Role, role if role in _ROLES else "both"),
        group=pod_labels.get(labels.GROUP),
        pool=pod_labels.get(labels.POOL),
        engine=pod_labels.get(labels.ENGINE, s.engine),
    )


def _http_port(pod: Mapping[str, Any], default: int) -> int:
    for container in (pod.get("spec") or {}).get("containers") or ():
        for port in container.get("ports") or ():
            if port.get("name") == "http" and isinstance(port.get("containerPort"), int):
                return int(port["containerPort"])
    return default


def pod_key(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def reconcile(
    known: Mapping[str, str], pods: Iterable[Mapping[str, Any]], s: DiscoverySettings
) -> tuple[dict[str, Backend], list[str]]:
    """From a full pod list: (pod key -> backend to have, backend ids to drop). ``known``: pod key -> id."""
    want: dict[str, Backend] = {}
    for pod in pods:
        b = backend_from_pod(pod, s)
        if b is not None:
            want[pod_key(pod)] = b
    wanted_ids = {b.id for b in want.values()}
    drop = [bid for key, bid in known.items() if bid not in wanted_ids]
    return want, drop


class Discovered:
    """Applies discovery results to the router's pool; owns the pod -> backend id map (loop thread only)."""

    def __init__(self, state: RouterState, s: DiscoverySettings) -> None:
        self.state, self.s = state, s
        self.by_pod: dict[str, str] = {}

    def on_list(self, pods: list[dict[str, Any]]) -> None:
        want, drop = reconcile(self.by_pod, pods, self.s)
        for bid in drop:
            self._remove(bid)
        self.by_pod = {}
        for key, backend in want.items():
            self._add(key, backend)

    def on_event(self, kind: str, pod: dict[str, Any]) -> None:
        key = pod_key(pod)
        backend = None if kind == "DELETED" else backend_from_pod(pod, self.s)
        old = self.by_pod.get(key)
        if old is not None and (backend is None or backend.id != old):
            self._remove(old)
            del self.by_pod[key]
        if backend is not None:
            self._add(key, backend)

    def _add(self, key: str, backend: Backend) -> None:
        if backend.id not in self.state.pool:
            log.info("discovered %s (%s)", backend.id, key)
            self.state.pool.add(backend)
            self.state.scrape_soon(backend.id)
        else:
            self.state.pool.add(backend)
        self.by_pod[key] = backend.id

    def _remove(self, backend_id: str) -> None:
        if self.state.pool.remove(backend_id) is not None:
            self.state.core.forget(backend_id)
            log.info("lost %s", backend_id)


async def discover(
    state: RouterState, s: DiscoverySettings, connect: Callable[[], KubeClient], stop: asyncio.Event
) -> None:
    """Keep the pool equal to the ready pods matching ``s.selector`` until ``stop`` is set."""
    from infctl.kube.watch import follow_pods  # the kube layer loads only when discovery is configured

    loop = asyncio.get_running_loop()
    target = Discovered(state, s)
    halt = threading.Event()
    client = connect()

    def call(fn: Callable[..., None], *args: Any) -> None:
        loop.call_soon_threadsafe(fn, *args)

    worker = asyncio.create_task(
        asyncio.to_thread(
            follow_pods,
            client,
            s.namespace,
            s.selector,
            on_list=lambda pods: call(target.on_list, pods),
            on_event=lambda kind, pod: call(target.on_event, kind, pod),
            on_error=lambda err: log.warning("discovery: %s", err.message),
            stop=halt,
            timeout_s=5,
        )
    )
    try:
        await stop.wait()
    finally:
        halt.set()
        await asyncio.gather(worker, return_exceptions=True)
        client.close()
