"""The daemon on Kubernetes (kmock's API server over HTTP) sizes each length pool from its own engines'
signals and divides the GPU budget between the pools with the planner the policy and the simulator use
(:func:`~infctl.autoscaler.planner.fit_budget`), from the rendered autoscaler file's ``pool`` targets."""

from __future__ import annotations

import asyncio
import itertools

import httpx
import pytest

from infctl.autoscaler.daemon import AutoscalerConfig, serve
from infctl.autoscaler.kube import KubeActuator, KubeScaleAPI
from infctl.autoscaler.kubefile import parse_kube_file
from infctl.autoscaler.planner import PoolDemand, fit_budget
from infctl.autoscaler.snapshot import Decision, ScalingSnapshot
from infctl.kube import KubeClient

PATH = "/apis/apps/v1/namespaces/inference/deployments"
POOLS = {"short": 10.0, "long": 40.0}
"""Waiting requests per engine in each pool (two engines each)."""


@pytest.fixture
def deployments() -> dict[str, tuple[int, int]]:
    return {f"m-{pool}": (2, 2) for pool in POOLS}


def router() -> httpx.MockTransport:
    """A router whose engines carry their pool label: the long pool's queues are four times the short's."""
    backends = [
        {"id": f"{pool}-{i}", "role": "both", "pool": pool, "queue": queue, "kv_usage": 0.2}
        for pool, queue in POOLS.items()
        for i in range(2)
    ]

    def handle(req: httpx.Request) -> httpx.Response:
        if req.url.path == "/admin/backends":
            return httpx.Response(200, json={"backends": backends})
        return httpx.Response(200, text="infctl_router_queue_depth 0\n")

    return httpx.MockTransport(handle)


async def test_the_gpu_budget_is_divided_between_pools_by_their_load(kmock_client: KubeClient) -> None:
    data = {
        "release": "m",
        "router_url": "http://router:8000",
        "targets": [
            {
                "kind": "Deployment",
                "name": f"m-{pool}",
                "role": "both",
                "pool": pool,
                "min": 1,
                "max": 10,
                "gpus": 8,
            }
            for pool in POOLS
        ],
        "queue_per_replica": {"up": 8.0, "down": 1.0},
        "gpu_budget": 48,
    }
    kf = parse_kube_file(data, "autoscaler.yaml")
    cfg = AutoscalerConfig(policy=kf.policy(), interval_s=0.01, port=None)
    actuator = KubeActuator(kf.targets, KubeScaleAPI(kmock_client), kf.file.router_url)
    stop, seen = asyncio.Event(), []

    def on_decision(decision: Decision, snap: ScalingSnapshot) -> None:
        seen.append(decision)
        stop.set()

    clock = itertools.count(0.0, 15.0)
    await asyncio.wait_for(
        serve(
            cfg, actuator, stop=stop, on_decision=on_decision, transport=router(), clock=lambda: next(clock)
        ),
        timeout=20,
    )
    counts = {}
    for pool in POOLS:
        obj = await asyncio.to_thread(kmock_client.request, "GET", f"{PATH}/m-{pool}")
        counts[pool] = int(obj["spec"]["replicas"])
    # Each pool's own queue: short needs 20/8 -> 3 engines, long 80/8 -> 10 (4 more at most per step: 6).
    # 9 engines of 8 GPUs exceed 48: the planner shares 6 by load (3 vs 10 engines' worth).
    pools = [PoolDemand(p, 0.0, 0.0, 1.0, 1.0, 8, 1, 10) for p in POOLS]
    assert counts == fit_budget({"short": 3, "long": 6}, {"short": 3.0, "long": 10.0}, pools, 48)
    assert counts == {"short": 2, "long": 4}
    reasons = [r.reason for d in seen for r in d.recommendations]
    assert any("GPU budget 48 shared by load" in r for r in reasons)
