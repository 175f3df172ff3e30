"""Pure verdicts on the gang mechanisms that need more than their CRDs: LeaderWorkerSet's subgroup label on
the GPU nodes, and Kueue's topology-aware scheduling (a Topology listing the switch label, a ResourceFlavor
that points at it and selects GPU nodes, the LocalQueue the groups are admitted from, the nodes carrying
every level's label).

The Topology and ResourceFlavor are cluster objects the operator owns; infctl never renders them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from infctl.config import DeploymentProfile
from infctl.doctor.nodes import NodeView, gpu_nodes, names
from infctl.doctor.result import CheckResult, Group, failed, passed, skipped
from infctl.manifests.group_set import KUEUE_PREFERRED, KUEUE_REQUIRED

G: Group = "cluster"
HOSTNAME = "kubernetes.io/hostname"
KUEUE_APIS = ("kueue.x-k8s.io/v1beta2", "kueue.x-k8s.io/v1beta1")
"""Versions doctor reads Kueue's objects at, newest first (v1beta1 is still served, deprecated)."""
KUEUE_NEEDS = frozenset(("kueue.x-k8s.io", p) for p in ("topologies", "resourceflavors", "localqueues"))
"""(bare group, plural) a kueue profile needs served (``infctl.doctor.crds``'s Kueue family)."""


@dataclass(frozen=True, slots=True)
class KueueObjects:
    """What the cluster holds of Kueue's placement setup (read by ``cluster_probe``)."""

    topologies: Sequence[Mapping[str, Any]]
    flavors: Sequence[Mapping[str, Any]]
    queue: Mapping[str, Any] | None
    """The profile's LocalQueue in the release's namespace; None when absent."""


def needs(profile: DeploymentProfile | None) -> set[tuple[str, str]]:
    """What the profile's gang mechanism needs served beyond the kinds it renders."""
    cluster = profile.cluster if profile is not None else None
    if profile is None or cluster is None or profile.mode != "group" or cluster.gang.scheduler != "kueue":
        return set()
    return set(KUEUE_NEEDS)


def evaluate_subgroup_label(
    nodes: Sequence[NodeView], profile: DeploymentProfile | None, *, target: str = ""
) -> CheckResult | None:
    """lws with ``subgroup_topology``: every GPU node carries that label (a replica is held under one value
    of it; a node without it can hold no replica). None when no subgroup label is asked for."""
    cluster = profile.cluster if profile is not None else None
    if cluster is None or cluster.gang.scheduler != "lws" or cluster.gang.subgroup_topology is None:
        return None
    label = cluster.gang.subgroup_topology
    gpus = gpu_nodes(nodes, cluster.gpu_resource, cluster.node_selector)
    lacking = [n for n in gpus if label not in n.labels]
    name = "lws subgroup label"
    if not gpus:
        return skipped(G, name, "no GPU node to check", target=target)
    if lacking:
        return failed(
            G,
            name,
            f"{len(lacking)} of {len(gpus)} GPU nodes lack {label} ({names(lacking)}): LWS places no "
            "engine replica on them",
            f"label them (kubectl label node {lacking[0].name} {label}=<domain>), or drop "
            "cluster.gang.subgroup_topology",
            target=target,
        )
    values = sorted({n.labels[label] for n in gpus})
    return passed(G, name, f"{label} on all {len(gpus)} GPU nodes ({len(values)} values)", target=target)


def evaluate_kueue(
    found: KueueObjects,
    nodes: Sequence[NodeView],
    profile: DeploymentProfile,
    namespace: str,
    *,
    target: str = "",
) -> list[CheckResult]:
    """Kueue TAS for PD groups: the Topology, the flavor pointing at it, the LocalQueue, the node labels."""
    cluster = profile.cluster
    assert cluster is not None and cluster.gang.queue_name is not None
    gang, switch = cluster.gang, cluster.switch_label
    out = []
    candidates = [
        t
        for t in found.topologies
        if gang.topology_name is None or t.get("metadata", {}).get("name") == gang.topology_name
    ]
    topology = next((t for t in candidates if switch in levels(t)), None)
    if topology is None:
        seen = ", ".join(f"{_name(t)} ({' > '.join(levels(t))})" for t in candidates) or "none"
        wanted = f"Topology {gang.topology_name}" if gang.topology_name else "a Topology"
        out.append(
            failed(
                G,
                "kueue topology",
                f"{wanted} listing {switch} as a level places a group under one switch; found {seen}",
                f"create a kueue.x-k8s.io Topology whose spec.levels include nodeLabel {switch} "
                f"(lowest level {HOSTNAME}), and a ResourceFlavor with spec.topologyName naming it",
                target=target,
            )
        )
    else:
        out.append(
            passed(G, "kueue topology", f"{_name(topology)}: {' > '.join(levels(topology))}", target=target)
        )
        out.append(_flavor(found.flavors, topology, nodes, profile, target))
        out.append(_level_labels(topology, nodes, profile, target))
    if found.queue is None:
        out.append(
            failed(
                G,
                "kueue queue",
                f"no LocalQueue {gang.queue_name} in namespace {namespace}: the groups would wait unadmitted",
                f"create LocalQueue {gang.queue_name} in {namespace} pointing at a ClusterQueue whose "
                "resource groups use the topology's ResourceFlavor",
                target=target,
            )
        )
    else:
        queue = found.queue.get("spec", {}).get("clusterQueue", "?")
        mode = gang.topology
        key = KUEUE_REQUIRED if mode == "required" else KUEUE_PREFERRED
        out.append(
            passed(
                G,
                "kueue queue",
                f"LocalQueue {namespace}/{gang.queue_name} -> ClusterQueue {queue}; groups {mode} under one "
                f"{switch} ({key})",
                target=target,
            )
        )
    return out


def levels(topology: Mapping[str, Any]) -> list[str]:
    return [str(lv.get("nodeLabel")) for lv in topology.get("spec", {}).get("levels") or []]


def _name(obj: Mapping[str, Any]) -> str:
    return str(obj.get("metadata", {}).get("name", "?"))


def _flavor(
    flavors: Sequence[Mapping[str, Any]],
    topology: Mapping[str, Any],
    nodes: Sequence[NodeView],
    profile: DeploymentProfile,
    target: str,
) -> CheckResult:
    cluster = profile.cluster
    assert cluster is not None
    name = _name(topology)
    pointing = [f for f in flavors if f.get("spec", {}).get("topologyName") == name]
    if not pointing:
        return failed(
            G,
            "kueue flavor",
            f"no ResourceFlavor has spec.topologyName {name}: Kueue applies no topology to admissions",
            f"set spec.topologyName: {name} (and spec.nodeLabels selecting the GPU nodes) on the flavor "
            "your ClusterQueue uses",
            target=target,
        )
    gpus = gpu_nodes(nodes, cluster.gpu_resource, cluster.node_selector)
    for flavor in pointing:
        labels = flavor.get("spec", {}).get("nodeLabels") or {}
        matched = [n for n in gpus if all(n.labels.get(k) == v for k, v in labels.items())]
        if labels and matched:
            shown = ", ".join(f"{k}={v}" for k, v in labels.items())
            return passed(
                G,
                "kueue flavor",
                f"{_name(flavor)} -> {name}, selecting {len(matched)} of {len(gpus)} GPU nodes ({shown})",
                target=target,
            )
    return failed(
        G,
        "kueue flavor",
        f"ResourceFlavor {', '.join(_name(f) for f in pointing)} -> {name} selects no GPU node "
        "(spec.nodeLabels missing or matching none)",
        "set the flavor's spec.nodeLabels to labels the GPU nodes carry (Kueue requires one with a topology)",
        target=target,
    )


def _level_labels(
    topology: Mapping[str, Any], nodes: Sequence[NodeView], profile: DeploymentProfile, target: str
) -> CheckResult:
    """Every level's label on every GPU node: TAS counts a node only under a full path of levels."""
    cluster = profile.cluster
    assert cluster is not None
    gpus = gpu_nodes(nodes, cluster.gpu_resource, cluster.node_selector)
    if not gpus:
        return skipped(G, "kueue topology labels", "no GPU node to check", target=target)
    missing = {lv: [n for n in gpus if lv not in n.labels] for lv in levels(topology)}
    missing = {lv: lacking for lv, lacking in missing.items() if lacking}
    if missing:
        lv, lacking = next(iter(missing.items()))
        shown = "; ".join(f"{label}: {len(ns)} nodes" for label, ns in missing.items())
        return failed(
            G,
            "kueue topology labels",
            f"GPU nodes lack levels of Topology {_name(topology)} ({shown}): Kueue places nothing on them",
            f"kubectl label node {lacking[0].name} {lv}=<value> (and the others: {names(lacking)})",
            target=target,
        )
    return passed(
        G,
        "kueue topology labels",
        f"all {len(gpus)} GPU nodes carry {', '.join(levels(topology))}",
        target=target,
    )
