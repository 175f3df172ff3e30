"""The Kubernetes actuator through the real kube layer against kmock's API server over HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import kmock
import kubernetes.client
import pytest

from infctl.autoscaler.kube import KubeActuator, KubeScaleAPI, KubeTarget
from infctl.autoscaler.snapshot import UnitStatus
from infctl.kube import ClientSettings, KubeClient, connect


@pytest.fixture
async def kube() -> AsyncIterator[tuple[kmock.KubernetesEmulator, KubeClient]]:
    async with kmock.KubernetesEmulator() as api, kmock.Server(api) as server:
        api.resources["apps/v1/deployments"] = kmock.ResourceInfo(
            kind="Deployment", namespaced=True, subresources={"scale", "status"}
        )
        cfg = kubernetes.client.Configuration()
        cfg.host = str(server.url).rstrip("/")
        client = connect(ClientSettings(namespace="inference", timeout_s=5), configuration=cfg)
        yield api, client
        client.close()


async def test_reads_spec_and_ready_replicas_and_scales_through_the_scale_subresource(
    kube: tuple[kmock.KubernetesEmulator, KubeClient],
) -> None:
    api, client = kube
    body = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "m-decode"},
        "spec": {"replicas": 2},
        "status": {"readyReplicas": 1},
    }
    path = "/apis/apps/v1/namespaces/inference/deployments"
    await asyncio.to_thread(client.request, "POST", path, body=body)
    actuator = KubeActuator([KubeTarget("decode", "Deployment", "m-decode")], KubeScaleAPI(client))
    assert (await actuator.observe()).units == {"decode": UnitStatus(desired=2, ready=1)}
    await actuator.scale("decode", 5)
    scales = [r for r in api if r.subresource == "scale"]
    assert scales[-1].url.path == f"{path}/m-decode/scale" and scales[-1].data == {"spec": {"replicas": 5}}
    assert (await actuator.observe()).units["decode"].desired == 5


async def test_a_kind_the_kube_layer_cannot_scale_is_a_note_not_a_crash(
    kube: tuple[kmock.KubernetesEmulator, KubeClient],
) -> None:
    _, client = kube
    actuator = KubeActuator([KubeTarget("decode", "StatefulSet", "m-decode")], KubeScaleAPI(client))
    fleet = await actuator.observe()
    assert fleet.units == {} and "cannot scale a StatefulSet" in fleet.notes[0]
