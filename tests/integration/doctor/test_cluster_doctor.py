"""Cluster checks against a fake Kubernetes API (kmock, real HTTP on 127.0.0.1) reached through a
kubeconfig, as an operator's would be: a CRD the profile needs is missing, GPU nodes lack the switch label."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import kmock
import pytest
from doctorkit import AccessReviewingEmulator

from infctl.config import DeploymentProfile, load_deployment
from infctl.doctor.cluster_probe import check_cluster
from infctl.doctor.result import CheckResult
from infctl.kube import ClientSettings, connect

PROFILE = Path(__file__).parents[3] / "profiles" / "deepseek-v3-group.yaml"
BLOCK = "network.topology.nvidia.com/block"
SERVED = (
    "gateway.networking.k8s.io/v1/httproutes",
    "monitoring.coreos.com/v1/servicemonitors",
    "monitoring.coreos.com/v1/podmonitors",
    "monitoring.coreos.com/v1/prometheusrules",
)


def kubeconfig(path: Path, server: str) -> Path:
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "clusters": [{"name": "fake", "cluster": {"server": server}}],
        "users": [{"name": "me", "user": {"token": "t"}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "me", "namespace": "ns"}}],
    }))  # fmt: skip
    return path


def node(name: str, labels: dict[str, str], gpus: int = 8) -> dict[str, Any]:
    labels = {"nvidia.com/gpu.product": "NVIDIA-H200", **labels}
    return {
        "metadata": {"name": name, "labels": labels},
        "status": {"allocatable": {"nvidia.com/gpu": str(gpus), "rdma/ib": "1k", "cpu": "96"}},
    }


def pod(name: str, ready: bool) -> dict[str, Any]:
    labels = {"infctl.io/release": "deepseek-v3", "app.kubernetes.io/component": "engine"}
    conditions = (
        [{"type": "Ready", "status": "True"}]
        if ready
        else [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/12 nodes are available: 12 Insufficient nvidia.com/gpu.",
            }
        ]
    )
    phase = "Running" if ready else "Pending"
    return {
        "metadata": {"name": name, "namespace": "inference", "labels": labels},
        "status": {"phase": phase, "conditions": conditions},
    }


@pytest.fixture
async def api() -> AsyncIterator[AccessReviewingEmulator]:
    async with AccessReviewingEmulator() as emulator, kmock.Server(emulator):
        yield emulator


def fake_cluster(api: Any, *, labelled: int, unlabelled: int, deny: tuple[str, str] | None = None) -> None:
    for key in SERVED:
        api.resources[key] = {}
    for i in range(labelled):
        api.objects["v1/nodes", None, f"gpu-a{i}"] = node(f"gpu-a{i}", {BLOCK: "block-1"})
    for i in range(unlabelled):
        api.objects["v1/nodes", None, f"gpu-b{i}"] = node(f"gpu-b{i}", {})
    for name, ready in (("deepseek-v3-g0-prefill-0", True), ("deepseek-v3-g0-decode-0", False)):
        api.objects["v1/pods", "inference", name] = pod(name, ready)
    api.allow = lambda attrs: deny is None or (attrs["verb"], attrs["resource"]) != deny


async def doctor(api: Any, tmp_path: Path, profile: DeploymentProfile | None) -> dict[str, CheckResult]:
    config = kubeconfig(tmp_path / "kubeconfig", str(api.url).rstrip("/"))
    results = await check_cluster(lambda: connect(ClientSettings(kubeconfig=config, timeout_s=5)), profile)
    return {r.name: r for r in results}


async def test_missing_crd_and_unlabelled_gpu_nodes_are_reported_with_fixes(api, tmp_path) -> None:
    fake_cluster(api, labelled=6, unlabelled=6, deny=("delete", "deployments"))
    found = await doctor(api, tmp_path, load_deployment(PROFILE))

    assert found["api"].status == "pass" and "v1.26" in found["api"].summary
    lws = found["crds: LeaderWorkerSet"]
    assert lws.status == "fail" and "leaderworkersets.leaderworkerset.x-k8s.io" in lws.summary
    assert lws.fix is not None and "github.com/kubernetes-sigs/lws" in lws.fix
    assert found["crds: Gateway API"].status == "pass"
    assert found["crds: KEDA"].status == "skip"  # not rendered by this profile

    label = found["switch label"]
    assert label.status == "warn" and "6 of 12 GPU nodes" in label.summary
    assert label.fix is not None and f"kubectl label node gpu-b0 {BLOCK}=<switch>" in label.fix
    capacity = found["switch capacity"]
    assert capacity.status == "warn" and "1 of 2 groups" in capacity.summary

    perms = found["permissions"]
    assert perms.status == "fail" and "deployments.apps: delete" in perms.summary
    assert found["gpu nodes"].status == "pass" and "96 allocatable" in found["gpu nodes"].summary
    assert found["rdma"].status == "pass"
    assert found["metrics apis"].status == "warn" and "metrics-server" in (found["metrics apis"].fix or "")
    pods = found["engine pods"]
    assert pods.status == "warn"
    assert "1 of 2 not ready: deepseek-v3-g0-decode-0: Pending: 0/12" in pods.summary
    assert "kubectl -n inference describe pod deepseek-v3-g0-decode-0" in (pods.fix or "")


async def test_no_gpu_node_with_the_switch_label_fails(api, tmp_path) -> None:
    fake_cluster(api, labelled=0, unlabelled=3)
    found = await doctor(api, tmp_path, load_deployment(PROFILE))
    assert found["switch label"].status == "fail"
    assert found["switch capacity"].status == "skip"
    assert found["gpu nodes"].status == "fail" and "needs 96" in found["gpu nodes"].summary


async def test_without_a_profile_missing_crds_only_warn(api, tmp_path) -> None:
    fake_cluster(api, labelled=2, unlabelled=0)
    found = await doctor(api, tmp_path, None)
    assert found["crds: LeaderWorkerSet"].status == "warn"
    assert found["permissions"].status == "pass"
    assert found["switch label"].status == "skip"


async def test_unreachable_api_server_is_one_failure(tmp_path) -> None:
    config = kubeconfig(tmp_path / "kubeconfig", "http://127.0.0.1:1")
    results = await check_cluster(lambda: connect(ClientSettings(kubeconfig=config, timeout_s=2)), None)
    assert [(r.name, r.status) for r in results] == [("api", "fail")]
    assert "cannot reach" in results[0].summary
