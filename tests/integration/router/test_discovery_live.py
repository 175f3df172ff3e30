"""Kubernetes discovery against a fake API server (kmock, real HTTP) and real simulated engines."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import kubernetes.client

from infctl.kube.client import MERGE_PATCH, ClientSettings, KubeClient, connect
from infctl.router.discovery import DiscoverySettings

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def engine_pod(name: str, port: int, *, ready: bool) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "llm",
            "labels": {"infctl.io/release": "demo", "infctl.io/role": "both"},
        },
        "spec": {
            "containers": [
                {"name": "engine", "image": "x", "ports": [{"name": "http", "containerPort": port}]}
            ]
        },
        "status": {
            "phase": "Running",
            "podIP": "127.0.0.1",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


async def until(check: Any) -> None:
    async with asyncio.timeout(10):
        while not await check():
            await asyncio.sleep(0.05)


async def test_router_follows_ready_pods(kmock: Any, start_sim, start_router) -> None:
    sims = await start_sim(instances=2)
    ports = [int(u.rsplit(":", 1)[1]) for u in sims.urls]
    cfg = kubernetes.client.Configuration()
    cfg.host = str(kmock.url)

    def kube() -> KubeClient:
        return connect(ClientSettings(namespace="llm"), configuration=cfg)

    api = kube()
    await asyncio.to_thread(
        api.request, "POST", "/api/v1/namespaces/llm/pods", body=engine_pod("e0", ports[0], ready=True)
    )
    await asyncio.to_thread(
        api.request, "POST", "/api/v1/namespaces/llm/pods", body=engine_pod("e1", ports[1], ready=False)
    )
    settings = DiscoverySettings(namespace="llm", selector="infctl.io/release=demo")
    url = await start_router([], discovery=settings, kube_connect=kube)
    async with httpx.AsyncClient(timeout=10) as c:

        async def backends() -> set[str]:
            return {b["id"] for b in (await c.get(f"{url}/admin/backends")).json()["backends"]}

        async def only_first() -> bool:
            return await backends() == {sims.urls[0]}

        await until(only_first)
        r = await c.post(f"{url}/v1/completions", json={"model": MODEL, "prompt": "hi", "max_tokens": 1})
        assert r.status_code == 200

        path = "/api/v1/namespaces/llm/pods/e1"
        ready = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
        await asyncio.to_thread(api.request, "PATCH", path, body=ready, content_type=MERGE_PATCH)

        async def both() -> bool:
            return await backends() == set(sims.urls)

        await until(both)
        await asyncio.to_thread(api.request, "DELETE", "/api/v1/namespaces/llm/pods/e0")

        async def only_second() -> bool:
            return await backends() == {sims.urls[1]}

        await until(only_second)
    api.close()
