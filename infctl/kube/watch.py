"""Listing and watching pods by label selector (the router's Kubernetes discovery).

Blocking, like the rest of this package: callers run :func:`follow_pods` in a thread. A watch that times out
or breaks is restarted after a fresh list, so a pod deleted while nobody watched is still noticed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import kubernetes.client
import kubernetes.watch
import urllib3

from infctl.errors import KubeError
from infctl.kube.client import KubeClient

Pod = dict[str, Any]


def list_pods(client: KubeClient, namespace: str, selector: str) -> list[Pod]:
    data = client.request("GET", f"/api/v1/namespaces/{namespace}/pods", query={"labelSelector": selector})
    items = data.get("items", [])
    return [p for p in items if isinstance(p, dict)]


def watch_pods(
    client: KubeClient, namespace: str, selector: str, *, timeout_s: int, stop: threading.Event
) -> Iterator[tuple[str, Pod]]:
    """(ADDED | MODIFIED | DELETED, raw pod) until the server ends the watch or ``stop`` is set."""
    core = kubernetes.client.CoreV1Api(client.api)
    w = kubernetes.watch.Watch()  # type: ignore[no-untyped-call]
    try:
        for event in w.stream(  # type: ignore[no-untyped-call]
            core.list_namespaced_pod,
            namespace,
            label_selector=selector,
            timeout_seconds=timeout_s,
            _request_timeout=timeout_s + 5,
        ):
            yield str(event["type"]), event["raw_object"]
            if stop.is_set():
                break
    finally:
        w.stop()  # type: ignore[no-untyped-call]


def follow_pods(
    client: KubeClient,
    namespace: str,
    selector: str,
    *,
    on_list: Callable[[list[Pod]], None],
    on_event: Callable[[str, Pod], None],
    stop: threading.Event,
    timeout_s: int = 30,
    retry_s: float = 2.0,
    on_error: Callable[[KubeError], None] | None = None,
) -> None:
    """List, then watch, until ``stop``: the whole pod set after every (re)list, then each change."""
    while not stop.is_set():
        try:
            on_list(list_pods(client, namespace, selector))
            for kind, pod in watch_pods(client, namespace, selector, timeout_s=timeout_s, stop=stop):
                on_event(kind, pod)
        except KubeError as err:
            if on_error is not None:
                on_error(err)
            stop.wait(retry_s)
        except (urllib3.exceptions.HTTPError, OSError, kubernetes.client.ApiException) as err:
            if on_error is not None:
                on_error(KubeError(f"pod watch failed: {err}"))
            stop.wait(retry_s)
