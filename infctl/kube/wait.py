"""Readiness: a pure verdict per object, and a polling loop with progress callbacks and a deadline."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from infctl.errors import KubeError
from infctl.kube.client import KubeClient
from infctl.kube.errors import NotReadyError
from infctl.kube.resources import Obj, object_path

WORKLOAD_KINDS = ("Deployment", "LeaderWorkerSet")


@dataclass(frozen=True)
class Readiness:
    kind: str
    name: str
    ready: bool
    detail: str
    """``3/4 ready``, ``rolling out``, ``not found``..."""


def readiness(obj: dict[str, Any]) -> Readiness:
    """Whether a live object is ready, by its status (pure)."""
    kind, name = obj.get("kind", "?"), obj.get("metadata", {}).get("name", "?")
    spec, status = obj.get("spec", {}), obj.get("status") or {}
    if kind not in WORKLOAD_KINDS:
        return Readiness(kind, name, True, "applied")
    want = int(spec.get("replicas", 1))
    generation = obj.get("metadata", {}).get("generation")
    observed = status.get("observedGeneration")
    if kind == "Deployment":
        if generation is not None and observed is not None and observed < generation:
            return Readiness(kind, name, False, "rollout pending")
        updated, available = int(status.get("updatedReplicas", 0)), int(status.get("availableReplicas", 0))
        ok = updated >= want and available >= want
        return Readiness(kind, name, ok, f"{available}/{want} available")
    ready = int(status.get("readyReplicas", 0))
    return Readiness(kind, name, ready >= want, f"{ready}/{want} groups ready")


Progress = Callable[[list[Readiness]], None]


def wait_ready(
    client: KubeClient,
    objects: list[Obj],
    namespace: str,
    *,
    timeout_s: float,
    interval_s: float = 2.0,
    on_progress: Progress | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> list[Readiness]:
    """Poll the workloads among ``objects`` until all are ready; NotReadyError names the laggards."""
    workloads = [o for o in objects if o["kind"] in WORKLOAD_KINDS]
    deadline = clock() + timeout_s
    while True:
        states = [_poll(client, o, namespace) for o in workloads]
        if on_progress is not None:
            on_progress(states)
        if all(s.ready for s in states):
            return states
        if clock() >= deadline:
            late = ", ".join(f"{s.kind}/{s.name} ({s.detail})" for s in states if not s.ready)
            raise NotReadyError(
                f"not ready after {timeout_s:g}s: {late}",
                hint=f"kubectl -n {namespace} describe pods -l infctl.io/release to see why; "
                "large models may need a longer --timeout",
            )
        sleep(interval_s)


def _poll(client: KubeClient, obj: Obj, namespace: str) -> Readiness:
    try:
        return readiness(client.request("GET", object_path(obj, namespace)))
    except KubeError as err:
        if err.status == 404:
            return Readiness(obj["kind"], obj["metadata"]["name"], False, "not found")
        raise
