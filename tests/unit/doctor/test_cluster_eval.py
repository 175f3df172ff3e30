"""Cluster verdicts on Node objects, discovery and access-review answers, as fixtures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from infctl.config import DeploymentProfile, load_deployment
from infctl.doctor.cluster_eval import (
    evaluate_gpu_nodes,
    evaluate_metrics_apis,
    evaluate_permissions,
    evaluate_switch_label,
    evaluate_version,
)
from infctl.doctor.crds import FAMILIES, evaluate_crds
from infctl.doctor.nodes import NodeView, node_views, quantity
from infctl.doctor.topology import evaluate_rdma, evaluate_switch_capacity, groups_per_switch
from infctl.manifests import KINDS
from infctl.manifests.kinds import kind_of
from infctl.manifests.render import render

BLOCK = "network.topology.nvidia.com/block"
QWEN = Path(__file__).parents[3] / "profiles" / "qwen3-8b-aggregated.yaml"


def cluster_profile(**cluster: Any) -> DeploymentProfile:
    """A group of 1 prefill + 1 decode replica of 4 GPUs each, on 8-GPU nodes."""
    return DeploymentProfile.model_validate({
        "name": "p", "mode": "group", "groups": 2, "group": {"prefill": 1, "decode": 1},
        "model": {"engine": "vllm", "model": "m", "tensor_parallel_size": 4, "pd": {}},
        "cluster": {"name": "c", "switch_label": BLOCK, "gpus_per_node": 8, **cluster},
    })  # fmt: skip


def nodes(*specs: tuple[str, dict[str, str], dict[str, str]], unschedulable: str = "") -> list[NodeView]:
    items = [
        {
            "metadata": {"name": n, "labels": labels},
            "spec": {"unschedulable": n == unschedulable},
            "status": {"allocatable": alloc},
        }
        for n, labels, alloc in specs
    ]
    return node_views(items)


GPU8 = {"nvidia.com/gpu": "8", "rdma/ib": "1k"}
GPU4 = {"nvidia.com/gpu": "4"}


def test_quantities() -> None:
    assert quantity("8") == 8 and quantity("1k") == 1000 and quantity("500m") == 0.5
    assert quantity("2Gi") == 2 * 2**30 and quantity("junk") == 0


def test_version_thresholds() -> None:
    assert evaluate_version({"major": "1", "minor": "30", "gitVersion": "v1.30.2"}).status == "pass"
    assert evaluate_version({"major": "1", "minor": "25+"}).status == "warn"  # EKS writes minor "25+"
    assert evaluate_version({"major": "1", "minor": "20"}).status == "fail"


def test_permissions_name_every_denied_verb() -> None:
    access = {
        ("get", "apps", "deployments"): True,
        ("patch", "apps", "deployments"): False,
        ("delete", "", "services"): False,
    }
    result = evaluate_permissions(access, "ns")
    assert result.status == "fail"
    assert result.summary == "denied in ns: deployments.apps: patch; services: delete"
    assert "kubectl auth can-i delete services -n ns" in (result.fix or "")
    assert evaluate_permissions({("get", "", "services"): True}, "ns").status == "pass"


def test_permissions_name_get_services_proxy_which_doctor_reads_daemons_through() -> None:
    deploy = {("get", "", "services"): True}
    missing = evaluate_permissions(deploy, "ns", proxy=False)
    assert missing.status == "warn"  # deploy works; doctor's router and autoscaler checks do not
    assert "not get services/proxy" in missing.summary and "router and autoscaler" in missing.summary
    assert "kubectl auth can-i get services/proxy -n ns" in (missing.fix or "")
    granted = evaluate_permissions(deploy, "ns", proxy=True)
    assert granted.status == "pass" and "get services/proxy" in granted.summary
    assert "services/proxy" not in evaluate_permissions(deploy, "ns").summary  # not reviewed: no profile
    both = evaluate_permissions({("patch", "apps", "deployments"): False}, "ns", proxy=False)
    assert both.status == "fail" and both.summary.endswith(
        "nor get services/proxy (doctor reads the router and autoscaler through it) in ns"
    )


def test_no_gpu_resource_suggests_the_one_the_nodes_advertise() -> None:
    found = nodes(("n1", {}, {"amd.com/gpu": "8"}))
    result = evaluate_gpu_nodes(found, None)
    assert result.status == "fail" and "set cluster.gpu_resource to one of: amd.com/gpu" in (result.fix or "")
    assert "GPU Operator" in (evaluate_gpu_nodes(nodes(("n1", {}, {"cpu": "8"})), None).fix or "")


def test_gpu_nodes_against_the_profile() -> None:
    profile = cluster_profile()  # 2 groups x 2 replicas x 4 GPUs = 16
    two = nodes(("a", {}, GPU8), ("b", {}, GPU8), ("c", {}, GPU8), unschedulable="c")
    assert evaluate_gpu_nodes(two, profile).status == "pass"
    one = nodes(("a", {}, GPU8))
    assert evaluate_gpu_nodes(one, profile).status == "fail"
    short = nodes(("a", {}, GPU8), ("b", {}, {"nvidia.com/gpu": "4"}), ("c", {}, GPU8))
    result = evaluate_gpu_nodes(short, profile)
    assert result.status == "warn" and "fewer than 8 on b" in result.summary
    selected = cluster_profile(node_selector={"pool": "gpu"})
    assert evaluate_gpu_nodes(two, selected).status == "fail"  # no node carries pool=gpu


def test_switch_label_missing_suggests_a_label_the_nodes_do_carry() -> None:
    zone = "topology.kubernetes.io/zone"
    found = nodes(("a", {zone: "z1"}, GPU8), ("b", {zone: "z1", BLOCK: "b1"}, GPU8))
    result = evaluate_switch_label(found, cluster_profile())
    assert result.status == "warn" and "missing on 1 of 2 GPU nodes: a" in result.summary
    assert f"kubectl label node a {BLOCK}=<switch>" in (result.fix or "")
    assert f"cluster.switch_label: {zone}" in (result.fix or "")
    none = evaluate_switch_label(nodes(("a", {}, GPU8)), cluster_profile())
    assert none.status == "fail"
    assert evaluate_switch_label(found, None).status == "skip"


def test_groups_per_switch_and_capacity() -> None:
    # one group = 2 replicas x 4 GPUs = one 8-GPU node
    found = nodes(("a", {BLOCK: "b1"}, GPU8), ("b", {BLOCK: "b1"}, GPU8), ("c", {BLOCK: "b2"}, GPU4))
    profile = cluster_profile()
    assert groups_per_switch(found, profile) == {"b1": 2, "b2": 0}
    assert evaluate_switch_capacity(found, profile).status == "pass"
    small = nodes(("a", {BLOCK: "b1"}, GPU4), ("b", {BLOCK: "b2"}, GPU4))
    result = evaluate_switch_capacity(small, profile)
    assert result.status == "fail" and "no switch holds one group" in result.summary
    one = evaluate_switch_capacity(nodes(("a", {BLOCK: "b1"}, GPU8)), profile)
    assert one.status == "warn" and "1 of 2 groups" in one.summary


def test_replicas_spanning_nodes_need_whole_nodes_under_one_switch() -> None:
    profile = DeploymentProfile.model_validate({
        "name": "p", "mode": "group", "group": {"prefill": 1, "decode": 1},
        "model": {"engine": "vllm", "model": "m", "tensor_parallel_size": 8, "data_parallel_size": 2,
                  "pd": {}},
        "cluster": {"name": "c", "switch_label": BLOCK, "gpus_per_node": 8},
    })  # fmt: skip
    three = nodes(*((f"n{i}", {BLOCK: "b1"}, GPU8) for i in range(3)))
    assert groups_per_switch(three, profile) == {"b1": 0}  # a group needs 4 whole nodes
    four = nodes(*((f"n{i}", {BLOCK: "b1"}, GPU8) for i in range(4)))
    assert groups_per_switch(four, profile) == {"b1": 1}


def test_rdma() -> None:
    profile = cluster_profile(rdma_resource="rdma/ib")
    assert evaluate_rdma(nodes(("a", {}, GPU8)), profile).status == "pass"
    lacking = evaluate_rdma(nodes(("a", {}, GPU8), ("b", {}, {"nvidia.com/gpu": "8"})), profile)
    assert lacking.status == "warn" and "on b" in lacking.summary
    assert evaluate_rdma(nodes(("b", {}, {"nvidia.com/gpu": "8"})), profile).status == "fail"
    assert evaluate_rdma(nodes(("a", {}, GPU8)), cluster_profile()).status == "warn"  # PD without RDMA
    assert evaluate_rdma([], None).status == "skip"


def test_crds_by_what_the_profile_needs() -> None:
    served = {"gateway.networking.k8s.io/v1": {"httproutes", "gateways"}}
    needed = {("leaderworkerset.x-k8s.io/v1", "leaderworkersets")}
    found = {r.name: r for r in evaluate_crds(served, needed)}
    assert len(found) == len(FAMILIES)
    assert found["crds: Gateway API"].status == "pass"
    lws = found["crds: LeaderWorkerSet"]
    assert lws.status == "fail" and "kubernetes-sigs/lws" in (lws.fix or "")
    assert found["crds: KEDA"].status == "skip"
    without_profile = {r.name: r for r in evaluate_crds(served, None)}
    keda = without_profile["crds: KEDA"]
    assert keda.status == "warn" and "kedacore" in (keda.fix or "")
    assert "rbg" in (without_profile["crds: RoleBasedGroup (RBG)"].fix or "")


def test_every_custom_kind_infctl_renders_is_checked() -> None:
    """A kind missing from FAMILIES is one doctor says nothing about while deploy fails on it later."""
    checked = {kind for fam in FAMILIES for kind in fam.kinds}
    unchecked = [
        k.kind
        for k in KINDS
        if k.crd is not None and not {(k.api_version, k.plural), (k.group, k.plural)} & checked
    ]
    assert unchecked == []


def test_a_gke_gateway_needs_the_gcpbackendpolicy_crd() -> None:
    """cluster.gateway: gke renders a GCPBackendPolicy (networking.gke.io/v1): doctor fails on a cluster
    that does not serve it, with deploy's install hint, and stays quiet about it everywhere else."""
    profile = load_deployment(QWEN, ["cluster.gateway=gke"])
    needed = {(kind_of(o).api_version, kind_of(o).plural) for o in render(profile)}
    served = {api: {plural} for api, plural in needed}
    name = "crds: GKE GCPBackendPolicy"
    assert {r.name: r for r in evaluate_crds(served, needed)}[name].status == "pass"
    served.pop("networking.gke.io/v1")
    gke = {r.name: r for r in evaluate_crds(served, needed)}[name]
    assert gke.status == "fail" and "gcpbackendpolicies.networking.gke.io" in gke.summary
    assert gke.fix is not None and "gcloud container clusters update" in gke.fix
    standard = {(kind_of(o).api_version, kind_of(o).plural) for o in render(load_deployment(QWEN))}
    assert {r.name: r for r in evaluate_crds(served, standard)}[name].status == "skip"
    assert {r.name: r for r in evaluate_crds(served, None)}[name].status == "skip"  # not a warning off GKE


def test_metrics_apis() -> None:
    assert evaluate_metrics_apis({"metrics.k8s.io", "external.metrics.k8s.io"}).status == "pass"
    missing = evaluate_metrics_apis({"apps"})
    assert missing.status == "warn" and "metrics-server" in (missing.fix or "")


def test_engine_pods() -> None:
    from infctl.doctor.pods import evaluate_engine_pods

    def pod(name: str, status: dict[str, Any], release: str = "r") -> dict[str, Any]:
        return {"metadata": {"name": name, "labels": {"infctl.io/release": release}}, "status": status}

    ready = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    crashing = {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "False"}],
        "containerStatuses": [{"state": {"waiting": {"reason": "CrashLoopBackOff"}}}],
    }
    assert evaluate_engine_pods([pod("a", ready)], "r", "ns").status == "pass"
    assert evaluate_engine_pods([pod("a", ready, release="other")], "r", "ns").status == "skip"
    result = evaluate_engine_pods([pod("a", crashing)], "r", "ns")
    assert result.status == "fail" and "a: Running: CrashLoopBackOff" in result.summary
