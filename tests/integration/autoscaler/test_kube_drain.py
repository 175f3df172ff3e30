"""Scale-in on Kubernetes loses no stream: the autoscaler drains the pod it removes through every router
(the pod's ``infctl.io/draining`` annotation, seen by discovery), waits for its engine to finish, then
scales; and an engine pod's rendered preStop hook waits for the engine's requests in flight.

Against the fake API server (kmock extended in ``tests/integration/kube/kubefake.py``: watches, label
selectors, the scale subresource), a real router discovering the pods, and simulated engines held mid-stream
(``/admin/faults`` hang) so the streams are certainly in flight while the scale-in runs.
"""

from __future__ import annotations

import asyncio
import importlib.util
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import kmock
import kubernetes.client
import pytest

from infctl.autoscaler.kube import KubeActuator, KubeScaleAPI, KubeTarget
from infctl.autoscaler.kube_drain import DELETION_COST, KubeDrainer, KubePodAPI
from infctl.config import load_deployment
from infctl.engines import get_adapter
from infctl.kube.client import ClientSettings, KubeClient, connect
from infctl.manifests import labels as L
from infctl.manifests.drain import prestop_command
from infctl.router.discovery import DiscoverySettings

NS = "llm"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
TOKENS = 60
ROOT = Path(__file__).resolve().parents[3]


def _kubefake() -> ModuleType:
    if "kubefake" not in sys.modules:  # shared with the kube and router tests, loaded once by name
        path = ROOT / "tests" / "integration" / "kube" / "kubefake.py"
        spec = importlib.util.spec_from_file_location("kubefake", path)
        assert spec is not None and spec.loader is not None
        sys.modules["kubefake"] = module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return sys.modules["kubefake"]


@pytest.fixture
async def kube() -> AsyncIterator[Callable[[], KubeClient]]:
    async with _kubefake().ClusterEmulator() as api, kmock.Server(api) as server:
        api.serve()
        cfg = kubernetes.client.Configuration()
        cfg.host = str(server.url).rstrip("/")
        yield lambda: connect(ClientSettings(namespace=NS, timeout_s=10), configuration=cfg)


SELECTOR = {L.RELEASE: "demo", L.WORKLOAD: "engine"}


READY = {"type": "Ready", "status": "True"}


def pod(name: str, port: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": {**SELECTOR, L.SERVES: "http"}},
        "spec": {
            "containers": [
                {"name": "engine", "image": "x", "ports": [{"name": "http", "containerPort": port}]}
            ]
        },
        "status": {"phase": "Running", "podIP": "127.0.0.1", "conditions": [READY]},
    }


async def call(api: KubeClient, method: str, path: str, body: Any = None) -> Any:
    return await asyncio.to_thread(api.request, method, path, body=body)


async def until(check: Callable[[], Awaitable[bool]], within: float = 30) -> None:
    async with asyncio.timeout(within):  # a deadline, not a duration: ends as soon as the check holds
        while not await check():
            await asyncio.sleep(0.05)


async def stream(client: httpx.AsyncClient, url: str) -> int:
    """One streamed completion of exactly TOKENS tokens; the content chunks received."""
    body = {"model": MODEL, "prompt": "hello " * 20, "max_tokens": TOKENS, "stream": True, "ignore_eos": True}
    chunks = 0
    async with client.stream("POST", f"{url}/v1/completions", json=body) as resp:
        assert resp.status_code == 200
        async for line in resp.aiter_lines():
            chunks += line.startswith("data: {")
    return chunks


async def hang(client: httpx.AsyncClient, urls: list[str], on: bool) -> None:
    for url in urls:
        assert (await client.post(f"{url}/admin/faults", json={"hang": on})).status_code == 200


async def test_scale_in_drains_the_removed_pod_and_no_stream_is_cut(
    kube: Callable[[], KubeClient], start_sim: Any, start_router: Any
) -> None:
    sims = await start_sim(instances=2, time_scale=0.02)
    ports = [int(u.rsplit(":", 1)[1]) for u in sims.urls]
    client = kube()
    deploy = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "demo-engine", "namespace": NS},
        "spec": {"replicas": 2, "selector": {"matchLabels": SELECTOR}},
        "status": {"readyReplicas": 2},
    }
    await call(client, "POST", f"/apis/apps/v1/namespaces/{NS}/deployments", deploy)
    for i, port in enumerate(ports):
        await call(client, "POST", f"/api/v1/namespaces/{NS}/pods", pod(f"e{i}", port))
    settings = DiscoverySettings(namespace=NS, selector="infctl.io/release=demo", watch_timeout_s=1)
    router = await start_router([], discovery=settings, kube_connect=kube, policy="least_load")
    async with httpx.AsyncClient(timeout=60, trust_env=False) as http:

        async def backends() -> dict[str, dict[str, Any]]:
            return {b["url"]: b for b in (await http.get(f"{router}/admin/backends")).json()["backends"]}

        async def both_found() -> bool:
            return set(await backends()) == set(sims.urls)

        await until(both_found)
        await hang(http, sims.urls, on=True)
        held = [asyncio.create_task(stream(http, router)) for _ in range(4)]

        async def all_in_flight() -> bool:
            return sum(b["inflight"] for b in (await backends()).values()) == 4

        await until(all_in_flight)
        drainer = KubeDrainer(KubePodAPI(client), http, get_adapter("vllm"), timeout_s=120, interval_s=0.1)
        target = KubeTarget("engine", "Deployment", "demo-engine")
        actuator = KubeActuator([target], KubeScaleAPI(client), drainer=drainer)
        scaling = asyncio.create_task(actuator.scale("engine", 1))

        async def one_draining() -> bool:
            return sum(bool(b["draining"]) for b in (await backends()).values()) == 1

        await until(one_draining)  # every router watching the pods sees the annotation
        victim_url = next(u for u, b in (await backends()).items() if b["draining"])
        survivor_url = next(u for u in sims.urls if u != victim_url)
        victim = f"e{sims.urls.index(victim_url)}"
        marked = await call(client, "GET", f"/api/v1/namespaces/{NS}/pods/{victim}")
        assert marked["metadata"]["annotations"] == {L.DRAINING: "true", DELETION_COST: "-1000000"}
        before = (await backends())[victim_url]["inflight"]
        late = [asyncio.create_task(stream(http, router)) for _ in range(2)]

        async def late_on_the_survivor() -> bool:
            return (await backends())[survivor_url]["inflight"] + before == 6

        await until(late_on_the_survivor)  # new requests avoid the draining pod
        await asyncio.sleep(0.5)
        assert not scaling.done()  # its engine still holds streams: no scale yet
        spec = await call(client, "GET", f"/apis/apps/v1/namespaces/{NS}/deployments/demo-engine")
        assert spec["spec"]["replicas"] == 2
        await hang(http, sims.urls, on=False)
        chunks = await asyncio.gather(*held, *late)
        await asyncio.wait_for(scaling, 60)
    assert chunks == [TOKENS] * 6  # every stream, the drained pod's included, ran to its last token
    spec = await call(client, "GET", f"/apis/apps/v1/namespaces/{NS}/deployments/demo-engine")
    assert spec["spec"]["replicas"] == 1
    client.close()


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
async def test_the_rendered_prestop_hook_waits_for_requests_in_flight(start_sim: Any, engine: str) -> None:
    name = "deepseek-v3-group.yaml" if engine == "sglang" else "qwen3-8b-aggregated.yaml"
    profile = load_deployment(ROOT / "profiles" / name, ["drain.settle_s=0", "drain.timeout_s=120"])
    assert profile.model.engine == engine
    sims = await start_sim(personality=engine, time_scale=0.02)
    url = sims.urls[0]
    port = url.rsplit(":", 1)[1]
    command = prestop_command(profile, int(port), leader=True)
    assert command[3:5] == ["127.0.0.1", port]  # the container's own engine
    async with httpx.AsyncClient(timeout=60, trust_env=False) as http:
        await hang(http, [url], on=True)
        held = asyncio.create_task(stream(http, url))
        hook = await asyncio.create_subprocess_exec(sys.executable, *command[1:])
        try:
            await asyncio.sleep(2.5)  # two polls at least: the hook sees the request and keeps waiting
            assert hook.returncode is None
            await hang(http, [url], on=False)
            assert await held == TOKENS
            assert await asyncio.wait_for(hook.wait(), 30) == 0
        finally:
            if hook.returncode is None:
                hook.kill()
                await hook.wait()
    assert (
        subprocess.run(
            [sys.executable, *command[1:3], "127.0.0.1", "9", "0", "5", "x"], timeout=30
        ).returncode
        == 0
    )
