"""Kubernetes discovery against the fake API server (kmock extended in ``tests/integration/kube/kubefake.py``:
real HTTP, watches with resourceVersion, timeoutSeconds and bookmarks) and real simulated engines."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import kmock
import kubernetes.client
import pytest

from infctl.kube.client import MERGE_PATCH, ClientSettings, KubeClient, connect
from infctl.router.config import RouterConfig
from infctl.router.discovery import DiscoverySettings
from infctl.router.server import serve

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
NS = "llm"


def _kubefake() -> ModuleType:
    if "kubefake" not in sys.modules:  # shared with the kube and cutover tests, loaded once by name
        path = Path(__file__).resolve().parents[1] / "kube" / "kubefake.py"
        spec = importlib.util.spec_from_file_location("kubefake", path)
        assert spec is not None and spec.loader is not None
        sys.modules["kubefake"] = module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return sys.modules["kubefake"]


@pytest.fixture
async def kube() -> AsyncIterator[tuple[Any, Callable[[], KubeClient]]]:
    """(the fake API server, a connect function for the router)."""
    async with _kubefake().ClusterEmulator() as api, kmock.Server(api) as server:
        api.serve()
        cfg = kubernetes.client.Configuration()
        cfg.host = str(server.url).rstrip("/")
        yield api, lambda: connect(ClientSettings(namespace=NS), configuration=cfg)


def engine_pod(
    name: str, port: int, *, ready: bool, kv_port: int | None = None, **labels: str
) -> dict[str, Any]:
    ports: list[dict[str, Any]] = [{"name": "http", "containerPort": port}]
    if kv_port is not None:
        ports.append({"name": "kv-events", "containerPort": kv_port})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": {"infctl.io/release": "demo", **labels}},
        "spec": {"containers": [{"name": "engine", "image": "x", "ports": ports}]},
        "status": {
            "phase": "Running",
            "podIP": "127.0.0.1",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


async def until(check: Callable[[], Awaitable[bool]]) -> None:
    async with asyncio.timeout(30):  # generous: a loaded 2-core machine once missed 10 s
        while not await check():
            await asyncio.sleep(0.05)


async def call(api: KubeClient, method: str, path: str, body: Any = None, **kw: Any) -> Any:
    return await asyncio.to_thread(
        api.request, method, f"/api/v1/namespaces/{NS}/pods{path}", body=body, **kw
    )


SETTINGS = DiscoverySettings(namespace=NS, selector="infctl.io/release=demo", watch_timeout_s=1)
"""Watches the fake server ends every second, so the router goes through resuming them."""


async def test_router_follows_ready_pods_on_one_list(kube: Any, start_sim: Any, start_router: Any) -> None:
    server, connect_kube = kube
    sims = await start_sim(instances=2)
    ports = [port_of(u) for u in sims.urls]
    api = connect_kube()
    await call(api, "POST", "", engine_pod("e0", ports[0], ready=True))
    await call(api, "POST", "", engine_pod("e1", ports[1], ready=False))
    url = await start_router([], discovery=SETTINGS, kube_connect=connect_kube)
    async with httpx.AsyncClient(timeout=10) as c:

        async def backends() -> set[str]:
            return {b["id"] for b in (await c.get(f"{url}/admin/backends")).json()["backends"]}

        async def only_first() -> bool:
            return await backends() == {sims.urls[0]}

        await until(only_first)
        r = await c.post(f"{url}/v1/completions", json={"model": MODEL, "prompt": "hi", "max_tokens": 1})
        assert r.status_code == 200

        ready = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
        await call(api, "PATCH", "/e1", ready, content_type=MERGE_PATCH)

        async def both() -> bool:
            return await backends() == set(sims.urls)

        await until(both)

        async def resumed_twice() -> bool:
            return len(server.watches) >= 3

        await until(resumed_twice)  # two watches ended by the server's timeout, resumed where they stopped
        await call(api, "DELETE", "/e0")

        async def only_second() -> bool:
            return await backends() == {sims.urls[1]}

        await until(only_second)
    assert len(server.lists) == 1
    assert all(w["resourceVersion"] for w in server.watches)
    api.close()


async def test_upstream_group_and_kv_events_come_from_the_pod(
    kube: Any, start_sim: Any, start_router: Any
) -> None:
    _, connect_kube = kube
    sim = await start_sim(kv_events_port=0, time_scale=0.01)
    kv_port = port_of(sim.instances[0].kv_endpoint)
    api = connect_kube()
    pod = engine_pod("e0", port_of(sim.urls[0]), ready=True, kv_port=kv_port, **{"infctl.io/upstream": "new"})
    await call(api, "POST", "", pod)
    url = await start_router([], discovery=SETTINGS, kube_connect=connect_kube, policy="prefix_precise")
    async with httpx.AsyncClient(timeout=10) as c:

        async def kv_sources() -> list[str]:
            return [s["endpoint"] for s in (await c.get(f"{url}/admin/policy")).json()["kv_sources"]]

        async def subscribed() -> bool:
            return await kv_sources() == [f"tcp://127.0.0.1:{kv_port}"]

        await until(subscribed)
        (backend,) = (await c.get(f"{url}/admin/backends")).json()["backends"]
        assert backend["upstream"] == "new"
        prompt = "the same long system prompt " * 40

        async def batches_applied() -> bool:
            r = await c.post(
                f"{url}/v1/completions", json={"model": MODEL, "prompt": prompt, "max_tokens": 1}
            )
            assert r.status_code == 200
            metrics = (await c.get(f"{url}/metrics")).text
            line = next(
                x for x in metrics.splitlines() if x.startswith("infctl_router_kv_event_batches_total")
            )
            return float(line.rsplit(" ", 1)[1]) > 0

        await until(batches_applied)  # the engine's own KV events reach the router's precise index
        await call(api, "DELETE", "/e0")

        async def unsubscribed() -> bool:
            return await kv_sources() == []

        await until(unsubscribed)
    api.close()


async def test_router_stops_at_once_while_its_watch_is_held_open(kube: Any, start_sim: Any) -> None:
    server, connect_kube = kube
    sim = await start_sim()
    api = connect_kube()
    await call(api, "POST", "", engine_pod("e0", port_of(sim.urls[0]), ready=True))
    held = DiscoverySettings(namespace=NS, selector="infctl.io/release=demo", watch_timeout_s=600)
    cfg = RouterConfig(backends=(), port=0, discovery=held, drain_timeout_s=0.1)
    stop = asyncio.Event()
    task = asyncio.create_task(serve(cfg, stop=stop, kube_connect=connect_kube))
    async with asyncio.timeout(30):
        while not server.watches:
            await asyncio.sleep(0.02)
    stop.set()
    await task

    # serve waits for the watch thread only briefly; it ends because stopping cut its connection, not
    # because the server's ten-minute watch ran out: within 10 s (it raced serve's return on 3.13 and
    # under load, so the thread is given a deadline rather than asserted gone at once).
    def watching() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name == "infctl-discovery" and t.is_alive()]

    async with asyncio.timeout(10):
        while watching():
            await asyncio.sleep(0.02)
    api.close()
