"""Doctor on the gang mechanisms that need more than a rendered kind, against a fake Kubernetes API (kmock,
real HTTP on 127.0.0.1): Kueue's CRDs, a Topology listing the switch label, a ResourceFlavor pointing at it
that selects the GPU nodes, the LocalQueue, every level's label on the nodes; LWS's subgroup label. The
Kueue objects the fake serves are first checked against the shipped CRD schemas (crds/kueue.yaml)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import kmock
import pytest
from doctorkit import AccessReviewingEmulator
from test_cluster_doctor import BLOCK, SERVED, kubeconfig, node

from infctl.config import DeploymentProfile, load_deployment
from infctl.doctor.cluster_probe import check_cluster
from infctl.doctor.result import CheckResult
from infctl.kube import ClientSettings, connect
from infctl.manifests.validate import validate_objects

PROFILE = Path(__file__).parents[3] / "profiles" / "deepseek-v3-group.yaml"
KUEUE = "kueue.x-k8s.io/v1beta2"
RACK = "cloud.provider.com/topology-rack"
CLIQUE = "nvidia.com/gpu.clique"


def with_gang(gang: dict[str, Any]) -> DeploymentProfile:
    profile = load_deployment(PROFILE)
    assert profile.cluster is not None
    cluster = profile.cluster.model_validate({**profile.cluster.model_dump(exclude_unset=True), "gang": gang})
    return profile.model_copy(update={"cluster": cluster})


def topology(name: str, *levels: str) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "Topology",
        "metadata": {"name": name},
        "spec": {"levels": [{"nodeLabel": lv} for lv in levels]},
    }


def flavor(name: str, topology_name: str, node_labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "ResourceFlavor",
        "metadata": {"name": name},
        "spec": {"nodeLabels": node_labels, "topologyName": topology_name},
    }


@pytest.fixture
async def api() -> AsyncIterator[AccessReviewingEmulator]:
    async with AccessReviewingEmulator() as emulator, kmock.Server(emulator):
        yield emulator


def cluster(api: Any, *, kueue: bool, rack_on: int = 6, clique_on: int = 6) -> None:
    for key in (*SERVED, "leaderworkerset.x-k8s.io/v1/leaderworkersets"):
        api.resources[key] = {}
    if kueue:
        for plural in ("topologies", "resourceflavors", "localqueues"):
            api.resources[f"{KUEUE}/{plural}"] = {}
    for i in range(6):
        labels = {BLOCK: f"block-{i // 3}", "kubernetes.io/hostname": f"gpu-{i}"}
        labels |= {RACK: f"rack-{i // 3}"} if i < rack_on else {}
        labels |= {CLIQUE: f"clique-{i // 2}"} if i < clique_on else {}
        api.objects["v1/nodes", None, f"gpu-{i}"] = node(f"gpu-{i}", labels)


def add(api: Any, *objs: dict[str, Any]) -> None:
    assert validate_objects(objs) == []  # the fixtures are what the real CRDs admit
    for obj in objs:
        plural = {"Topology": "topologies", "ResourceFlavor": "resourceflavors"}[obj["kind"]]
        api.objects[f"{KUEUE}/{plural}", None, obj["metadata"]["name"]] = obj


def add_queue(api: Any, name: str = "serving") -> None:
    queue = {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": name, "namespace": "inference"}}
    api.objects[f"{KUEUE}/localqueues", "inference", name] = {**queue, "spec": {"clusterQueue": "gpus"}}


async def doctor(api: Any, tmp_path: Path, profile: DeploymentProfile) -> dict[str, CheckResult]:
    config = kubeconfig(tmp_path / "kubeconfig", str(api.url).rstrip("/"))
    results = await check_cluster(lambda: connect(ClientSettings(kubeconfig=config, timeout_s=5)), profile)
    return {r.name: r for r in results}


KUEUE_GANG = {"scheduler": "kueue", "queue_name": "serving"}


async def test_kueue_without_its_crds_fails_with_the_install(api, tmp_path) -> None:
    cluster(api, kueue=False)
    found = await doctor(api, tmp_path, with_gang(KUEUE_GANG))
    crds = found["crds: Kueue"]
    assert crds.status == "fail" and "topologies.kueue.x-k8s.io" in crds.summary
    assert "kubernetes-sigs/kueue" in (crds.fix or "")
    assert found["kueue topology"].status == "fail"
    assert found["kueue queue"].status == "fail"


async def test_kueue_set_up_for_the_switch_passes(api, tmp_path) -> None:
    cluster(api, kueue=True)
    add(
        api,
        topology("network", BLOCK, RACK, "kubernetes.io/hostname"),
        flavor("h200", "network", {"nvidia.com/gpu.product": "NVIDIA-H200"}),
    )
    add_queue(api)
    found = await doctor(api, tmp_path, with_gang(KUEUE_GANG))
    assert found["crds: Kueue"].status == "pass"
    assert found["gang"].status == "pass" and "Kueue" in found["gang"].summary
    assert found["kueue topology"].status == "pass" and BLOCK in found["kueue topology"].summary
    assert found["kueue flavor"].status == "pass" and "6 of 6 GPU nodes" in found["kueue flavor"].summary
    assert found["kueue topology labels"].status == "pass"
    assert found["kueue queue"].status == "pass" and "ClusterQueue gpus" in found["kueue queue"].summary


async def test_kueue_topology_without_the_switch_or_a_flavor_or_labels_fails(api, tmp_path) -> None:
    cluster(api, kueue=True, rack_on=4)
    add(api, topology("racks", RACK, "kubernetes.io/hostname"))
    add_queue(api)
    found = await doctor(api, tmp_path, with_gang(KUEUE_GANG))
    top = found["kueue topology"]
    assert top.status == "fail" and "racks" in top.summary and BLOCK in (top.fix or "")

    add(api, topology("network", BLOCK, RACK))
    found = await doctor(api, tmp_path, with_gang(KUEUE_GANG))
    assert found["kueue topology"].status == "pass"
    assert found["kueue flavor"].status == "fail" and "topologyName network" in found["kueue flavor"].summary
    labels = found["kueue topology labels"]
    assert labels.status == "fail" and f"{RACK}: 2 nodes" in labels.summary
    assert f"kubectl label node gpu-4 {RACK}=<value>" in (labels.fix or "")

    add(api, flavor("elsewhere", "network", {"nvidia.com/gpu.product": "NVIDIA-B200"}))
    found = await doctor(api, tmp_path, with_gang(KUEUE_GANG))
    assert found["kueue flavor"].status == "fail" and "selects no GPU node" in found["kueue flavor"].summary


async def test_kueue_names_the_topology_it_was_told(api, tmp_path) -> None:
    cluster(api, kueue=True)
    add(api, topology("network", BLOCK), flavor("h200", "network", {"nvidia.com/gpu.product": "NVIDIA-H200"}))
    add_queue(api)
    found = await doctor(api, tmp_path, with_gang({**KUEUE_GANG, "topology_name": "fabric"}))
    assert found["kueue topology"].status == "fail" and "Topology fabric" in found["kueue topology"].summary


async def test_lws_subgroup_label_on_every_gpu_node(api, tmp_path) -> None:
    cluster(api, kueue=False, clique_on=5)
    found = await doctor(api, tmp_path, with_gang({"scheduler": "lws", "subgroup_topology": CLIQUE}))
    assert found["crds: LeaderWorkerSet"].status == "pass"
    assert found["crds: Kueue"].status == "skip"  # not this profile's mechanism
    assert found["gang"].status == "pass" and "exclusive topology" in found["gang"].summary
    sub = found["lws subgroup label"]
    assert sub.status == "fail" and "1 of 6 GPU nodes" in sub.summary and "gpu-5" in sub.summary

    labels = {BLOCK: "block-1", "kubernetes.io/hostname": "gpu-5", RACK: "rack-1", CLIQUE: "clique-2"}
    api.objects["v1/nodes", None, "gpu-5"] = node("gpu-5", labels)
    found = await doctor(api, tmp_path, with_gang({"scheduler": "lws", "subgroup_topology": CLIQUE}))
    assert found["lws subgroup label"].status == "pass"
    assert "kueue topology" not in found
