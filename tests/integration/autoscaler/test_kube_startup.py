"""The daemon on Kubernetes (kmock's API server over HTTP) measures how long a unit scaled up from 0 takes
to be ready, exports it on its /metrics, and flags a start-up longer than the router's hold.

The engine "starts" when the test marks the Deployment ready, after the daemon has decided again on a fake
clock that moves 15 s a decision: longer than the rendered hold of 1 s, whatever the wall clock does.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable

import httpx
import pytest

from infctl.autoscaler.daemon import AutoscalerConfig, serve
from infctl.autoscaler.kube import KubeActuator, KubeScaleAPI
from infctl.autoscaler.kubefile import parse_kube_file
from infctl.autoscaler.snapshot import Decision, ScalingSnapshot
from infctl.kube import KubeClient
from infctl.telemetry import parse_metrics

PATH = "/apis/apps/v1/namespaces/inference/deployments"
FILE = {
    "release": "m",
    "router_url": "http://router:8000",
    "targets": [
        {"kind": "Deployment", "name": "m-engine", "role": "both", "min": 0, "max": 2,
         "scale_to_zero_after_s": 86400},
    ],
    "hold_when_empty_s": 1.0,
}  # fmt: skip
H = "infctl_autoscaler_replica_startup_seconds"
OVER = "infctl_autoscaler_startup_over_hold"
LONGEST = "infctl_autoscaler_replica_startup_longest_seconds"
HOLD = "infctl_autoscaler_hold_when_empty_seconds"


@pytest.fixture
def deployments() -> dict[str, tuple[int, int]]:
    return {"m-engine": (0, 0)}


def router(held: Callable[[], int]) -> httpx.MockTransport:
    """A router with no engine that holds ``held()`` requests for one (scale-to-zero's admission queue)."""

    def handle(req: httpx.Request) -> httpx.Response:
        if req.url.path == "/admin/backends":
            return httpx.Response(200, json={"backends": []})
        return httpx.Response(200, text=f"infctl_router_queue_depth {held()}\n")

    return httpx.MockTransport(handle)


async def until(check: Callable[[], Awaitable[bool]], within: float = 20.0) -> None:
    async with asyncio.timeout(within):
        while not await check():
            await asyncio.sleep(0.01)


async def scrape(client: httpx.AsyncClient, url: str) -> dict[str, float]:
    """The daemon's start-up series for unit ``m-engine`` (absent ones NaN)."""
    families = parse_metrics((await client.get(url)).text, {H + "_count", OVER, LONGEST, HOLD})
    found = {
        name: s.value
        for name, samples in families.items()
        for s in samples
        if s.labels.get("unit", "m-engine") == "m-engine"
    }
    keys = {"count": H + "_count", "over": OVER, "longest": LONGEST, "hold": HOLD}
    return {k: found.get(name, float("nan")) for k, name in keys.items()}


async def test_a_start_up_from_zero_longer_than_the_hold_is_measured_and_flagged(
    kmock_client: KubeClient, unused_tcp_port: int, caplog: pytest.LogCaptureFixture
) -> None:
    kf = parse_kube_file(FILE, "autoscaler.yaml")
    cfg = AutoscalerConfig(
        policy=kf.policy(),
        interval_s=0.01,
        port=unused_tcp_port,
        hold_when_empty_s=kf.file.hold_when_empty_s,
    )
    actuator = KubeActuator(kf.targets, KubeScaleAPI(kmock_client), kf.file.router_url)
    ready = {"engine": False}
    decisions: list[Decision] = []

    def on_decision(decision: Decision, snap: ScalingSnapshot) -> None:
        decisions.append(decision)

    async def woken() -> bool:
        obj = await asyncio.to_thread(kmock_client.request, "GET", f"{PATH}/m-engine")
        return int(obj["spec"]["replicas"]) == 1

    async def decided_since(n: int) -> bool:
        return len(decisions) > n

    url = f"http://127.0.0.1:{unused_tcp_port}/metrics"
    client = httpx.AsyncClient(timeout=5, trust_env=False)

    async def measured() -> bool:
        return (await scrape(client, url))["count"] == 1

    stop = asyncio.Event()
    clock = itertools.count(0.0, 15.0)
    caplog.set_level(logging.WARNING, logger="infctl.autoscaler.daemon")
    daemon = asyncio.create_task(
        serve(
            cfg,
            actuator,
            stop=stop,
            on_decision=on_decision,
            transport=router(lambda: 0 if ready["engine"] else 1),
            clock=lambda: next(clock),
        )
    )
    try:
        await until(woken)  # from zero, by the request the router holds
        asked = len(decisions)
        await until(lambda: decided_since(asked))  # the daemon looks again: the engine is still starting
        before = await scrape(client, url)
        assert before["count"] == 0 and before["over"] == 0 and before["hold"] == 1.0
        patch = {"status": {"readyReplicas": 1}}
        path = f"{PATH}/m-engine/status"
        await asyncio.to_thread(
            kmock_client.request, "PATCH", path, body=patch, content_type="application/merge-patch+json"
        )
        ready["engine"] = True
        await until(measured)
        after = await scrape(client, url)
        assert after["over"] == 1.0
        assert after["longest"] >= 15.0  # at least one decision (15 s of the daemon's clock) after the ask
        await until(lambda: decided_since(asked + 5))  # warned once, however many decisions follow
        warnings = [r.getMessage() for r in caplog.records if "startup over hold" in r.getMessage()]
        assert len(warnings) == 1 and "m-engine" in warnings[0] and "hold_when_empty_s=1" in warnings[0]
    finally:
        stop.set()
        await asyncio.wait_for(daemon, timeout=10)
        await client.aclose()
