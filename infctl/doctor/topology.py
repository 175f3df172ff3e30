"""Pure verdicts on placement: enough GPUs under one switch for a PD group, and RDMA on the GPU nodes."""

from __future__ import annotations

import math
from collections.abc import Sequence

from infctl.config import DeploymentProfile
from infctl.doctor.nodes import NodeView, gpu_nodes, names
from infctl.doctor.result import CheckResult, Group, failed, passed, skipped, warned

G: Group = "cluster"


def replicas_fitting(
    nodes: Sequence[NodeView], resource: str, gpus_per_replica: int, gpus_per_node: int
) -> int:
    """Engine replicas the nodes can hold: spanning replicas take whole full nodes, small ones pack."""
    if gpus_per_replica >= gpus_per_node:
        full = sum(1 for n in nodes if n.count(resource) >= gpus_per_node)
        return full // math.ceil(gpus_per_replica / gpus_per_node)
    return sum(n.count(resource) // gpus_per_replica for n in nodes)


def groups_per_switch(nodes: Sequence[NodeView], profile: DeploymentProfile) -> dict[str, int]:
    """Switch label value -> whole PD groups its GPU nodes can hold."""
    cluster, layout = profile.cluster, profile.group
    assert cluster is not None and layout is not None
    by_switch: dict[str, list[NodeView]] = {}
    for n in gpu_nodes(nodes, cluster.gpu_resource, cluster.node_selector):
        if cluster.switch_label in n.labels:
            by_switch.setdefault(n.labels[cluster.switch_label], []).append(n)
    per_group = layout.prefill + layout.decode
    return {
        switch: replicas_fitting(
            members, cluster.gpu_resource, profile.model.gpus_per_replica, cluster.gpus_per_node
        )
        // per_group
        for switch, members in sorted(by_switch.items())
    }


def evaluate_switch_capacity(
    nodes: Sequence[NodeView], profile: DeploymentProfile | None, *, target: str = ""
) -> CheckResult:
    """Group mode: some switch holds a whole group, and the switches together hold every group."""
    if profile is None or profile.cluster is None or profile.mode != "group" or profile.group is None:
        mode = profile.mode if profile is not None else "no profile"
        return skipped(G, "switch capacity", f"{mode}: no PD group must share a switch", target=target)
    cluster, layout = profile.cluster, profile.group
    fits = groups_per_switch(nodes, profile)
    gpus = profile.model.gpus_per_replica
    need = f"{layout.prefill} prefill + {layout.decode} decode x {gpus} GPUs"
    group_gpus = (layout.prefill + layout.decode) * gpus
    if not fits:
        return skipped(G, "switch capacity", f"no GPU node carries {cluster.switch_label}", target=target)
    best = max(fits.values())
    shown = ", ".join(f"{s}: {n}" for s, n in list(fits.items())[:4])
    if best == 0:
        label, res = cluster.switch_label, cluster.gpu_resource
        size = {s: sum(n.count(res) for n in nodes if n.labels.get(label) == s) for s in fits}
        biggest = max(size, key=lambda s: size[s])
        return failed(
            G,
            "switch capacity",
            f"no switch holds one group of {need} ({group_gpus} GPUs); the "
            f"largest, {biggest}, has {size[biggest]} GPUs",
            "shrink the group and add groups instead, add nodes under one switch, or use mode: pool",
            target=target,
        )
    total = sum(fits.values())
    if total < profile.groups:
        return warned(
            G,
            "switch capacity",
            f"switches hold {total} of {profile.groups} groups ({shown})",
            "add GPU nodes under one switch, or lower groups",
            target=target,
        )
    return passed(G, "switch capacity", f"groups per switch: {shown} (need {profile.groups})", target=target)


def evaluate_rdma(
    nodes: Sequence[NodeView], profile: DeploymentProfile | None, *, target: str = ""
) -> CheckResult:
    """GPU nodes advertise the RDMA resource engines request (PD KV transfer without it falls back to TCP)."""
    cluster = profile.cluster if profile is not None else None
    if profile is None or cluster is None:
        return skipped(G, "rdma", "no cluster profile: give -f PROFILE", target=target)
    if cluster.rdma_resource is None:
        if profile.disaggregated:
            return warned(
                G,
                "rdma",
                "the cluster profile names no rdma_resource: PD KV transfer uses TCP",
                "set cluster.rdma_resource (e.g. rdma/ib, vpc.amazonaws.com/efa)",
                target=target,
            )
        return skipped(G, "rdma", "aggregated mode and no rdma_resource", target=target)
    gpus = gpu_nodes(nodes, cluster.gpu_resource, cluster.node_selector)
    lacking = [n for n in gpus if n.count(cluster.rdma_resource) < cluster.rdma_per_pod]
    fix = (
        f"install the RDMA device plugin (e.g. NVIDIA Network Operator, k8s-rdma-shared-dev-plugin, "
        f"EFA plugin) so nodes advertise {cluster.rdma_resource}"
    )
    if gpus and len(lacking) == len(gpus):
        return failed(
            G,
            "rdma",
            f"no GPU node advertises {cluster.rdma_per_pod} {cluster.rdma_resource}",
            fix,
            target=target,
        )
    if lacking:
        return warned(G, "rdma", f"{cluster.rdma_resource} missing on {names(lacking)}", fix, target=target)
    return passed(G, "rdma", f"{cluster.rdma_resource} on all {len(gpus)} GPU nodes", target=target)


def evaluate_gang(profile: DeploymentProfile | None, *, target: str = "") -> CheckResult:
    """Group mode: whether a PD group is scheduled whole (a gang scheduler's PodGroup) or by pod affinity
    alone; the chosen scheduler's CRD is checked with the rendered kinds (``crds``)."""
    if profile is None or profile.cluster is None or profile.mode != "group":
        mode = profile.mode if profile is not None else "no profile"
        return skipped(G, "gang", f"{mode}: no PD group to schedule whole", target=target)
    gang = profile.cluster.gang
    if gang.scheduler == "affinity":
        return warned(
            G,
            "gang",
            "PD groups are placed by pod affinity alone: the first pod picks the switch, and a group that "
            "no longer fits there is left half-scheduled, holding GPUs it cannot use",
            "schedule groups whole: set cluster.gang.scheduler to volcano, scheduler-plugins, lws or kueue "
            "(installed)",
            target=target,
        )
    switch = profile.cluster.switch_label
    if gang.scheduler == "lws":
        sub = (
            f", each engine replica alone under one {gang.subgroup_topology}"
            if gang.subgroup_topology
            else ""
        )
        return passed(
            G,
            "gang",
            f"every PD group is one LeaderWorkerSet group alone under one {switch} (exclusive topology){sub};"
            " whole or not at all only with LWS's gang scheduling (gangSchedulingManagement, Volcano)",
            target=target,
        )
    if gang.scheduler == "kueue":
        return passed(
            G,
            "gang",
            f"every PD group is one LeaderWorkerSet group admitted whole by Kueue from LocalQueue "
            f"{gang.queue_name}, {gang.topology} under one {switch} (topology-aware scheduling)",
            target=target,
        )
    return passed(
        G,
        "gang",
        f"every PD group is a {gang.scheduler} PodGroup scheduled by {gang.pod_scheduler}, under one "
        f"{profile.cluster.switch_label}",
        target=target,
    )
