"""The pod watch against the fake API server over HTTP: resume without re-listing, bookmarks, 410, stop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from kubefake import FakeCluster

from infctl.errors import KubeError
from infctl.kube.client import MERGE_PATCH
from infctl.kube.watch import PodWatch, WatchSettings

NS, SELECTOR = "inference", "app=engine"
QUICK = WatchSettings(timeout_s=1, backoff_min_s=0.05, backoff_max_s=0.2)
"""Watches the fake server ends every second, so tests see the resume path."""


def pod(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS,
            "labels": labels or {"app": "engine"}}, "status": {"phase": "Pending"}}  # fmt: skip


@dataclass
class Seen:
    lists: list[list[str]] = field(default_factory=list)
    events: list[tuple[str, str, str]] = field(default_factory=list)
    """(type, pod name, resourceVersion)."""
    errors: list[KubeError] = field(default_factory=list)

    def on_list(self, pods: list[dict[str, Any]]) -> None:
        self.lists.append(sorted(p["metadata"]["name"] for p in pods))

    def on_event(self, kind: str, p: dict[str, Any]) -> None:
        self.events.append((kind, p["metadata"]["name"], p["metadata"]["resourceVersion"]))


@dataclass
class Running:
    watch: PodWatch
    seen: Seen
    thread: threading.Thread


@pytest.fixture
async def start_watch(cluster: FakeCluster) -> AsyncIterator[Callable[[WatchSettings], Running]]:
    running: list[Running] = []

    def start(s: WatchSettings) -> Running:
        watch, seen = PodWatch(cluster.client, NS, SELECTOR, s), Seen()
        thread = threading.Thread(target=watch.run, args=(seen.on_list, seen.on_event, seen.errors.append))
        thread.start()
        running.append(Running(watch, seen, thread))
        return running[-1]

    yield start
    for r in running:
        r.watch.stop()
        await asyncio.to_thread(r.thread.join, 10)


async def until(check: Callable[[], bool]) -> None:
    async with asyncio.timeout(30):  # generous: a loaded 2-core machine watches late
        while not check():
            await asyncio.sleep(0.02)


async def call(cluster: FakeCluster, method: str, path: str, body: Any = None, **kw: Any) -> dict[str, Any]:
    path = f"/api/v1/namespaces/{NS}{path}"
    return await asyncio.to_thread(cluster.client.request, method, path, body=body, **kw)


async def test_changes_stream_and_a_timed_out_watch_resumes_without_a_new_list(
    cluster: FakeCluster, start_watch: Any
) -> None:
    await call(cluster, "POST", "/pods", pod("a"))
    r = start_watch(QUICK)
    await until(lambda: r.seen.lists == [["a"]] and len(cluster.api.watches) >= 1)
    await call(cluster, "POST", "/pods", pod("b"))
    await call(cluster, "PATCH", "/pods/b", {"status": {"phase": "Running"}}, content_type=MERGE_PATCH)
    await call(cluster, "DELETE", "/pods/a")
    await until(lambda: [k for k, *_ in r.seen.events] == ["ADDED", "MODIFIED", "DELETED"])
    await until(lambda: len(cluster.api.watches) >= 3)  # two more server timeouts
    assert r.seen.lists == [["a"]] and len(cluster.api.lists) == 1
    last = r.seen.events[-1][2]
    assert cluster.api.watches[-1]["resourceVersion"] == last
    assert cluster.api.watches[0]["timeoutSeconds"] == "1"
    await call(cluster, "POST", "/pods", pod("c"))
    await until(lambda: r.seen.events[-1][:2] == ("ADDED", "c"))
    assert r.seen.errors == []


async def test_bookmarks_move_the_resume_point_past_changes_the_selector_hides(
    cluster: FakeCluster, start_watch: Any
) -> None:
    r = start_watch(QUICK)
    await until(lambda: len(cluster.api.watches) >= 1)
    other = await call(cluster, "POST", "/pods", pod("x", app="db"))
    cluster.api.compact()
    await until(lambda: len(cluster.api.watches) >= 3)
    assert cluster.api.watches[-1]["resourceVersion"] == other["metadata"]["resourceVersion"]
    assert len(cluster.api.lists) == 1 and r.seen.events == []


@pytest.mark.parametrize("as_status", [False, True], ids=["error-event", "http-410"])
async def test_a_resume_point_the_server_forgot_brings_one_new_list(cluster: FakeCluster, start_watch: Any,
                                                                    as_status: bool) -> None:  # fmt: skip
    cluster.api.gone_as_status = as_status
    await call(cluster, "POST", "/pods", pod("a"))
    r = start_watch(WatchSettings(timeout_s=1, backoff_min_s=0.05, bookmarks=False))
    await until(lambda: len(cluster.api.watches) >= 1)
    await call(cluster, "POST", "/pods", pod("x", app="db"))  # moves the version; this watch never sees it
    cluster.api.objects["v1/pods", NS, "d"] = pod("d")  # stored without an event: lost to compaction
    cluster.api.compact()
    await until(lambda: len(r.seen.lists) == 2)
    assert r.seen.lists == [["a"], ["a", "d"]] and r.seen.events == [] and r.seen.errors == []
    resumed = str(cluster.api.compacted)  # the fresh list's version, which the next watch starts from
    await until(lambda: cluster.api.watches[-1]["resourceVersion"] == resumed)


async def test_stop_ends_a_long_watch_at_once(cluster: FakeCluster, start_watch: Any) -> None:
    r = start_watch(WatchSettings(timeout_s=600))
    await until(lambda: len(cluster.api.watches) == 1)
    r.watch.stop()
    await asyncio.to_thread(r.thread.join, 10)  # the server would hold this watch for ten minutes
    assert not r.thread.is_alive()


async def test_a_refusing_api_server_is_retried_with_backoff_then_listed(
    cluster: FakeCluster, start_watch: Any
) -> None:
    cluster.api.without.add("v1/pods")
    r = start_watch(QUICK)
    await until(lambda: len(r.seen.errors) >= 2)
    assert r.seen.errors[0].status == 404 and r.seen.lists == []
    cluster.api.without.discard("v1/pods")
    await until(lambda: r.seen.lists == [[]])
