"""The Kubernetes actuator through the real kube layer against kmock's API server over HTTP."""

from __future__ import annotations

import asyncio

import kmock

from infctl.autoscaler.kube import KubeActuator, KubeScaleAPI, KubeTarget
from infctl.autoscaler.snapshot import UnitStatus
from infctl.kube import KubeClient


async def test_reads_spec_and_ready_replicas_and_scales_through_the_scale_subresource(
    kmock_kube: tuple[kmock.KubernetesEmulator, KubeClient],
) -> None:
    api, client = kmock_kube
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
    kmock_kube: tuple[kmock.KubernetesEmulator, KubeClient],
) -> None:
    _, client = kmock_kube
    actuator = KubeActuator([KubeTarget("decode", "StatefulSet", "m-decode")], KubeScaleAPI(client))
    fleet = await actuator.observe()
    assert fleet.units == {} and "cannot scale a StatefulSet" in fleet.notes[0]
