"""Pure verdicts on what the API server said: version, permissions, GPU nodes, switch labels and capacity
under one switch, RDMA, metrics APIs. ``cluster_probe`` fetches; these functions judge."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from infctl.config import ClusterProfile, DeploymentProfile
from infctl.doctor.nodes import COMMON_SWITCH_LABELS, NodeView, gpu_like_resources, gpu_nodes, names
from infctl.doctor.result import CheckResult, Group, failed, passed, skipped, warned

G: Group = "cluster"
MIN_VERSION = (1, 22)
"""Server-side apply and policy/v1 PodDisruptionBudgets are GA from here."""
GOOD_VERSION = (1, 26)
"""LeaderWorkerSet needs this or later."""
DEFAULT_GPU_RESOURCE = "nvidia.com/gpu"

Access = tuple[str, str, str]
"""(verb, API group, resource plural), as a SelfSubjectAccessReview asks it."""


def evaluate_version(version: Mapping[str, Any], *, target: str = "") -> CheckResult:
    text = str(version.get("gitVersion") or f"v{version.get('major')}.{version.get('minor')}")
    found = tuple(int(re.sub(r"\D", "", str(version.get(k, "0"))) or 0) for k in ("major", "minor"))
    if found < MIN_VERSION:
        return failed(
            G,
            "api",
            f"reachable, Kubernetes {text}: older than {'.'.join(map(str, MIN_VERSION))}",
            "upgrade the cluster: deploy relies on server-side apply",
            target=target,
        )
    if found < GOOD_VERSION:
        return warned(
            G,
            "api",
            f"reachable, Kubernetes {text}: LeaderWorkerSet needs 1.26+",
            "upgrade the cluster before running engines that span nodes",
            target=target,
        )
    return passed(G, "api", f"reachable, Kubernetes {text}", target=target)


def evaluate_permissions(
    access: Mapping[Access, bool], namespace: str, *, proxy: bool | None = None, target: str = ""
) -> CheckResult:
    """The verbs deploy needs (``access``), and ``get services/proxy`` (``proxy``; None: not reviewed),
    which doctor reads the release's router and autoscaler through: without it those checks fail with a
    403, so its absence warns."""
    denied = sorted(k for k, ok in access.items() if not ok)
    if not access:
        return skipped(G, "permissions", "nothing to review", target=target)
    no_proxy = f"get services/proxy (doctor reads the router and autoscaler through it) in {namespace}"
    if not denied:
        allowed = f"all {len(access)} verbs deploy needs are allowed in {namespace}"
        if proxy is False:
            return warned(
                G,
                "permissions",
                f"{allowed}, but not {no_proxy}",
                f"ask for get on services/proxy in {namespace} (check with: kubectl auth can-i get "
                f"services/proxy -n {namespace}), or port-forward them (the router's and autoscaler's fixes "
                "say how)",
                target=target,
            )
        also = (
            " and get services/proxy, which doctor reads the router and autoscaler through" if proxy else ""
        )
        return passed(G, "permissions", f"{allowed}{also}", target=target)
    by_resource: dict[str, list[str]] = {}
    for verb, group, plural in denied:
        by_resource.setdefault(f"{plural}.{group}" if group else plural, []).append(verb)
    listed = "; ".join(f"{res}: {', '.join(verbs)}" for res, verbs in sorted(by_resource.items()))
    listed += f"; nor {no_proxy}" if proxy is False else ""
    verb, group, plural = denied[0]
    resource = f"{plural}.{group}" if group else plural
    return failed(
        G,
        "permissions",
        f"denied in {namespace}: {listed}",
        f"ask for a Role granting these verbs in {namespace} (check one with: kubectl auth can-i "
        f"{verb} {resource} -n {namespace})",
        target=target,
    )


def _resource(profile: DeploymentProfile | None) -> tuple[str, Mapping[str, str], ClusterProfile | None]:
    cluster = profile.cluster if profile is not None else None
    if cluster is None:
        return DEFAULT_GPU_RESOURCE, {}, None
    return cluster.gpu_resource, cluster.node_selector, cluster


def evaluate_gpu_nodes(
    nodes: Sequence[NodeView], profile: DeploymentProfile | None, *, target: str = ""
) -> CheckResult:
    """Schedulable nodes advertise the GPU resource, as many per node as the profile says, enough in all."""
    resource, selector, cluster = _resource(profile)
    gpus = gpu_nodes(nodes, resource, selector)
    if not gpus:
        others = gpu_like_resources(nodes)
        where = f" with labels {dict(selector)}" if selector else ""
        fix = (
            f"set cluster.gpu_resource to one of: {', '.join(others)}"
            if others
            else "install the NVIDIA GPU Operator (or device plugin) so nodes advertise GPUs"
        )
        return failed(G, "gpu nodes", f"no schedulable node{where} advertises {resource}", fix, target=target)
    total = sum(n.count(resource) for n in gpus)
    summary = f"{len(gpus)} nodes, {total} allocatable {resource}"
    if profile is None or cluster is None:
        return passed(G, "gpu nodes", summary, target=target)
    short = [n for n in gpus if n.count(resource) < cluster.gpus_per_node]
    needed = len(profile.engine_replicas()) * profile.model.gpus_per_replica
    if total < needed:
        return failed(
            G,
            "gpu nodes",
            f"{summary}; {profile.name} needs {needed}",
            "add GPU nodes, or fewer replicas or groups",
            target=target,
        )
    if short:
        return warned(
            G,
            "gpu nodes",
            f"{summary}; fewer than {cluster.gpus_per_node} on {names(short)}",
            "free or repair those nodes' GPUs, or correct cluster.gpus_per_node",
            target=target,
        )
    return passed(G, "gpu nodes", f"{summary} ({profile.name} needs {needed})", target=target)


def evaluate_switch_label(
    nodes: Sequence[NodeView], profile: DeploymentProfile | None, *, target: str = ""
) -> CheckResult:
    """Every GPU node carries the profile's switch label (a group's pods need it to land together)."""
    resource, selector, cluster = _resource(profile)
    if cluster is None:
        return skipped(G, "switch label", "no cluster profile: give -f PROFILE", target=target)
    gpus = gpu_nodes(nodes, resource, selector)
    label = cluster.switch_label
    lacking = [n for n in gpus if label not in n.labels]
    if not gpus:
        return skipped(G, "switch label", "no GPU nodes to check", target=target)
    if not lacking:
        values = sorted({n.labels[label] for n in gpus})
        return passed(
            G, "switch label", f"{label} on all {len(gpus)} GPU nodes ({len(values)} switches)", target=target
        )
    fix = f"label them: kubectl label node {lacking[0].name} {label}=<switch>"
    alternatives = [k for k in COMMON_SWITCH_LABELS if k != label and all(k in n.labels for n in gpus)]
    if alternatives:
        fix += f", or set cluster.switch_label: {alternatives[0]} (all GPU nodes carry it)"
    make = failed if len(lacking) == len(gpus) else warned
    return make(
        G,
        "switch label",
        f"{label} missing on {len(lacking)} of {len(gpus)} GPU nodes: {names(lacking)}",
        fix,
        target=target,
    )


METRICS_SERVER_FIX = (
    "install metrics-server: kubectl apply -f https://github.com/kubernetes-sigs/metrics-server/"
    "releases/latest/download/components.yaml"
)


def evaluate_metrics_apis(groups: Collection[str], *, target: str = "") -> CheckResult:
    """Resource metrics (metrics-server) for kubectl top and HPA; custom/external ones noted when present."""
    extra = [g for g in ("custom.metrics.k8s.io", "external.metrics.k8s.io") if g in groups]
    also = f"; also {', '.join(extra)}" if extra else ""
    if "metrics.k8s.io" not in groups:
        return warned(
            G,
            "metrics apis",
            f"metrics.k8s.io not served: no kubectl top, no CPU-based HPA{also}",
            METRICS_SERVER_FIX,
            target=target,
        )
    return passed(G, "metrics apis", f"metrics.k8s.io served{also}", target=target)
