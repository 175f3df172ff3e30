"""The daemon on Kubernetes (kmock's API server over HTTP) runs infctl's forecast and GPU budget from the
rendered autoscaler file: the router's prompt-token rate, not a queue, scales the Deployment ahead."""

from __future__ import annotations

import asyncio
import itertools

import httpx
import kmock
import pytest

from infctl.autoscaler.daemon import AutoscalerConfig, serve
from infctl.autoscaler.forecast import staffed
from infctl.autoscaler.kube import KubeActuator, KubeScaleAPI
from infctl.autoscaler.kubefile import parse_kube_file
from infctl.autoscaler.snapshot import Decision, ScalingSnapshot
from infctl.kube import KubeClient

PATH = "/apis/apps/v1/namespaces/inference/deployments"
CAP = 10_000.0
INTERVAL = 15.0


@pytest.fixture
def deployments() -> dict[str, tuple[int, int]]:
    return {"m-engine": (1, 1)}


def router(replicas_of_work: float) -> httpx.MockTransport:
    """A router whose counters grow by ``replicas_of_work`` replicas' worth of uncached prompt tokens per
    decision interval, with an idle engine: no queue, fast TTFT."""
    scrapes = itertools.count(1)

    def handle(req: httpx.Request) -> httpx.Response:
        if req.url.path == "/admin/backends":
            return httpx.Response(
                200, json={"backends": [{"id": "e0", "role": "both", "queue": 0, "kv_usage": 0.1}]}
            )
        n = next(scrapes)
        prompt = n * replicas_of_work * CAP * INTERVAL * 1.25
        text = (
            "infctl_router_queue_depth 0\n"
            f'infctl_router_time_to_first_byte_seconds_bucket{{le="0.1"}} {n * 10}\n'
            f'infctl_router_time_to_first_byte_seconds_bucket{{le="+Inf"}} {n * 10}\n'
            f'infctl_router_decisions_total{{policy="p",reason="least_load"}} {n * 10}\n'
            f"infctl_router_prompt_tokens_total {prompt}\n"
            f"infctl_router_estimated_cached_tokens_total {prompt * 0.2}\n"
        )
        return httpx.Response(200, text=text)

    return httpx.MockTransport(handle)


async def run_daemon(client: KubeClient, work: float, ticks: int, budget: int | None) -> list[Decision]:
    data = {
        "release": "m",
        "router_url": "http://router:8000",
        "targets": [
            {"kind": "Deployment", "name": "m-engine", "role": "both", "min": 1, "max": 10, "gpus": 8}
        ],
        "queue_per_replica": {"up": 8.0, "down": 1.0},
        "forecast": {"replica_prompt_tps": CAP, "lead_s": 30, "window_s": 30, "panic_window_s": 30},
        "gpu_budget": budget,
    }
    kf = parse_kube_file(data, "autoscaler.yaml")
    cfg = AutoscalerConfig(policy=kf.policy(ttft_slo_s=2.0), interval_s=0.01, port=None)
    actuator = KubeActuator(kf.targets, KubeScaleAPI(client), kf.file.router_url)
    stop, seen = asyncio.Event(), []

    def on_decision(decision: Decision, snap: ScalingSnapshot) -> None:
        seen.append(decision)
        if len(seen) == ticks:
            stop.set()

    clock = itertools.count(0.0, INTERVAL)
    await asyncio.wait_for(
        serve(
            cfg,
            actuator,
            stop=stop,
            on_decision=on_decision,
            transport=router(work),
            clock=lambda: next(clock),
        ),
        timeout=20,
    )
    return seen


async def replicas(client: KubeClient) -> int:
    obj = await asyncio.to_thread(client.request, "GET", f"{PATH}/m-engine")
    return int(obj["spec"]["replicas"])


async def test_the_prompt_token_rate_scales_the_deployment_ahead_of_any_queue(
    kmock_kube: tuple[kmock.KubernetesEmulator, KubeClient],
) -> None:
    api, client = kmock_kube
    decisions = await run_daemon(client, work=3.0, ticks=5, budget=None)
    want = staffed(3.0, 0.5)
    assert await replicas(client) == want
    scaled = [r for d in decisions for r in d.recommendations if r.changed]
    assert scaled and scaled[0].reason.startswith("forecast") and scaled[0].desired == want
    assert [r for r in api if r.subresource == "scale"][-1].data == {"spec": {"replicas": want}}


async def test_the_gpu_budget_caps_what_the_forecast_asks(
    kmock_kube: tuple[kmock.KubernetesEmulator, KubeClient],
) -> None:
    _, client = kmock_kube
    decisions = await run_daemon(client, work=8.0, ticks=5, budget=48)
    assert await replicas(client) == 6  # 48 GPUs of 8-GPU engines, though the demand needs 11
    assert any("GPU budget 48" in r.reason for d in decisions for r in d.recommendations)
