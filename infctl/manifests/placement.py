"""Placement planning: which workloads a deployment becomes, how many replicas each, and where they may run.

Pure functions of a :class:`~infctl.config.DeploymentProfile`; the renderer turns the plan into objects.

- Group mode: one workload per (group, role). Every pod of group ``gN`` carries ``infctl.io/group=gN`` and a
  *required* pod affinity to that label with the cluster's switch label as ``topologyKey``, so the scheduler
  puts a whole group under one switch (the first pod picks the switch, the rest follow it). Groups repel
  each other with pod anti-affinity on the same key, preferred by default (a busy cluster may still pack two
  groups under one switch) or required on request (one group per switch, at most). A group that cannot fit
  under one switch is refused before anything is rendered: the scheduler would leave it Pending forever.
- Pool mode: one workload per role, each its own scale target; no co-location constraint.
- Aggregated mode: one workload of replicas that both prefill and decode.
- Length pools (``length_pools``): the above per pool, each workload named after its pool and its pods
  labelled ``infctl.io/pool=<pool>``; groups are named ``<pool>-gN`` so they never pair across pools.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from infctl.config import DeploymentProfile, ReplicaSpec, Role, ScaleBounds
from infctl.engines import get_adapter
from infctl.errors import ConfigError
from infctl.manifests import labels as L

AntiAffinity = Literal["preferred", "required"]


@dataclass(frozen=True)
class WorkloadPlan:
    """One set of identical engine replicas: a Deployment, or a LeaderWorkerSet when a replica spans nodes."""

    workload: str
    """``g0-prefill``, ``decode``, ``engine``, ``short-decode`` (see ``ReplicaSpec.workload``)."""
    name: str
    """Object name: ``<release>-<workload>``."""
    role: Role
    replicas: int
    """Replicas at deploy time (the autoscaler moves this later)."""
    nodes_per_replica: int
    """1: a Deployment; more: a LeaderWorkerSet of this group size."""
    gpus_per_pod: int
    """GPUs each pod requests (a multi-node replica has one pod per node)."""
    group: str | None = None
    """The PD group's label value (``g0``, ``short-g0``), group mode only."""
    pool: str | None = None
    """The pool label value: a length pool's name, or prefill/decode in pool mode."""
    length_pool: str | None = None
    """The length pool this workload serves, when the profile has length pools."""
    selector: Mapping[str, str] = field(default_factory=dict)
    """Immutable selector labels of the workload's pods."""
    pod_labels: Mapping[str, str] = field(default_factory=dict)
    """Every label of the workload's pods (selector included)."""
    affinity: Mapping[str, Any] | None = None
    """The pod ``affinity`` stanza, or None."""
    autoscaled: bool = False
    """The autoscaler owns the replica count (bounds for this role and the autoscaler enabled)."""
    members: tuple[int, int] | None = None
    """A PD-group set (``cluster.gang.scheduler`` lws or kueue): (prefill, decode) engine replicas per group;
    ``replicas`` then counts groups, each one LeaderWorkerSet group (``infctl.manifests.group_set``)."""

    @property
    def annotations(self) -> dict[str, str] | None:
        return {L.AUTOSCALED: "true"} if self.autoscaled else None

    @property
    def multi_node(self) -> bool:
        """A LeaderWorkerSet: replicas span nodes, or each replica is a whole PD group."""
        return self.nodes_per_replica > 1 or self.members is not None


@dataclass(frozen=True)
class PlacementPlan:
    """Every engine workload of a deployment, in ``engine_replicas()`` order."""

    release: str
    mode: str
    switch_label: str | None
    workloads: tuple[WorkloadPlan, ...]
    nodes_per_group: int | None = None
    """Group mode: nodes one group occupies under its switch."""

    def replicas_by_role(self) -> dict[Role, int]:
        counts: dict[Role, int] = {}
        for w in self.workloads:
            counts[w.role] = counts.get(w.role, 0) + w.replicas
        return counts


def plan_placement(profile: DeploymentProfile, *, anti_affinity: AntiAffinity = "preferred") -> PlacementPlan:
    """The workloads of ``profile`` with their labels and affinity; ConfigError if a group cannot fit."""
    nodes_per_group = check_group_fits(profile) if profile.mode == "group" else None
    cluster = profile.cluster
    switch = cluster.switch_label if cluster is not None else None
    gpus = profile.model.gpus_per_replica
    per_node = gpus if cluster is None else min(gpus, cluster.gpus_per_node)
    counts: dict[str, int] = {}
    firsts: dict[str, ReplicaSpec] = {}
    for spec in profile.engine_replicas():
        counts[spec.workload] = counts.get(spec.workload, 0) + 1
        firsts.setdefault(spec.workload, spec)
    workloads = []
    for workload, replicas in counts.items():
        first = firsts[workload]
        role, group, pool = first.role, first.group_name, first.pool
        selector = {L.RELEASE: profile.name, L.WORKLOAD: workload}
        pod_labels = {
            **L.release_labels(profile.name, "engine", profile.model.engine),
            **selector,
            L.ROLE: role,
            L.ENGINE: profile.model.engine,
        }
        if group is not None:
            pod_labels[L.GROUP] = group
        if pool is not None:
            pod_labels[L.POOL] = pool
        # The engine's own count (its command line, extra_args included, as its release resolves it): the
        # router's backends per rank and an SGLang PD prefill's bootstrap rooms follow this label.
        ranks = get_adapter(profile.model.engine).dp_ranks(profile.model, role)
        if ranks > 1:
            pod_labels[L.DP_SIZE] = str(ranks)
        affinity = (
            group_affinity(profile.name, group, switch, anti_affinity)
            if group is not None and switch is not None
            else None
        )
        workloads.append(
            WorkloadPlan(
                workload=workload,
                name=f"{profile.name}-{workload}",
                role=role,
                replicas=replicas,
                nodes_per_replica=profile.nodes_per_replica,
                gpus_per_pod=per_node,
                group=group,
                pool=pool,
                length_pool=first.length_pool,
                selector=selector,
                pod_labels=pod_labels,
                affinity=affinity,
                autoscaled=profile.autoscaler.enabled and bounds_of(profile, first) is not None,
            )
        )
    if profile.mode == "group" and cluster is not None and cluster.gang.one_set_per_group:
        workloads = group_sets(profile, workloads)
    return PlacementPlan(profile.name, profile.mode, switch, tuple(workloads), nodes_per_group)


def group_sets(profile: DeploymentProfile, workloads: list[WorkloadPlan]) -> list[WorkloadPlan]:
    """The group-mode workloads folded into one PD-group set per length pool (or one for the deployment):
    a replica per group, with no role, group or affinity of its own (``infctl.manifests.group_set``)."""
    cluster = profile.cluster
    assert cluster is not None
    if profile.autoscaler.enabled and any(w.autoscaled for w in workloads):
        raise ConfigError(
            f"cluster.gang.scheduler {cluster.gang.scheduler} places whole PD groups (one LeaderWorkerSet "
            "replica each); the autoscaler's per-role bounds cannot scale a role inside a group",
            hint="scale groups by hand (groups: N), or choose gang scheduler volcano or scheduler-plugins",
        )
    sets: dict[str | None, list[WorkloadPlan]] = {}
    for w in workloads:
        sets.setdefault(w.length_pool, []).append(w)
    out = []
    for pool, members in sets.items():
        first = next(w for w in members if w.group is not None)
        shape = {w.role: w.replicas for w in members if w.group == first.group}
        workload = "pd" if pool is None else f"{pool}-pd"
        selector = {L.RELEASE: profile.name, L.WORKLOAD: workload}
        drop = (L.ROLE, L.GROUP, L.WORKLOAD)
        pod_labels = {**{k: v for k, v in first.pod_labels.items() if k not in drop}, **selector}
        out.append(
            WorkloadPlan(
                workload=workload,
                name=f"{profile.name}-{workload}",
                role=first.role,
                replicas=len({w.group for w in members}),
                nodes_per_replica=first.nodes_per_replica,
                gpus_per_pod=first.gpus_per_pod,
                pool=first.pool,
                length_pool=pool,
                selector=selector,
                pod_labels=pod_labels,
                members=(shape.get("prefill", 0), shape.get("decode", 0)),
            )
        )
    return out


def bounds_of(profile: DeploymentProfile, spec: ReplicaSpec) -> ScaleBounds | None:
    """The autoscaler bounds of ``spec``'s role: its length pool's, else the deployment's."""
    if spec.length_pool is not None and profile.length_pools is not None:
        pool = next(p for p in profile.length_pools if p.name == spec.length_pool)
        return pool.bounds(spec.role)
    bounds: ScaleBounds | None = getattr(profile.autoscaler, spec.role)
    return bounds


def group_affinity(release: str, group: str, switch_label: str, anti: AntiAffinity) -> dict[str, Any]:
    """Required affinity to the own group (its label value) under one ``switch_label`` value; anti-affinity
    to other groups."""
    own = {"matchLabels": {L.RELEASE: release, L.GROUP: group}}
    others = {
        "matchExpressions": [
            {"key": L.RELEASE, "operator": "In", "values": [release]},
            {"key": L.GROUP, "operator": "Exists"},
            {"key": L.GROUP, "operator": "NotIn", "values": [group]},
        ]
    }
    repel_term = {"labelSelector": others, "topologyKey": switch_label}
    repel: dict[str, Any] = (
        {"requiredDuringSchedulingIgnoredDuringExecution": [repel_term]}
        if anti == "required"
        else {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "podAffinityTerm": repel_term}
            ]
        }
    )
    return {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": own, "topologyKey": switch_label}
            ]
        },
        "podAntiAffinity": repel,
    }


def nodes_for(replicas: int, gpus_per_replica: int, gpus_per_node: int) -> int:
    """Nodes ``replicas`` engines occupy: whole nodes each when they span nodes, else packed per node."""
    if gpus_per_replica >= gpus_per_node:
        return replicas * math.ceil(gpus_per_replica / gpus_per_node)
    return math.ceil(replicas / (gpus_per_node // gpus_per_replica))


def check_group_fits(profile: DeploymentProfile) -> int | None:
    """Nodes the largest PD group needs; ConfigError when a group exceeds the nodes under one switch.

    None without a cluster profile. Unknown ``nodes_per_switch`` skips the check (nothing to compare with).
    With length pools every pool's group shape is checked.
    """
    cluster = profile.cluster
    if profile.length_pools is not None:
        shapes = [profile.group_shape(p) for p in profile.length_pools]
    else:
        shapes = [] if profile.group is None else [profile.group]
    if cluster is None or not shapes:
        return None
    gpus = profile.model.gpus_per_replica
    limit = cluster.nodes_per_switch
    most = 0
    for layout in shapes:
        replicas = layout.prefill + layout.decode
        nodes = nodes_for(replicas, gpus, cluster.gpus_per_node)
        most = max(most, nodes)
        if limit is not None and nodes > limit:
            fits = _largest_fitting(layout.prefill, layout.decode, gpus, cluster.gpus_per_node, limit)
            raise ConfigError(
                f"a PD group of {layout.prefill} prefill + {layout.decode} decode replicas x {gpus} GPUs "
                f"needs {nodes} nodes ({replicas * gpus} GPUs) under one switch, but {cluster.name} has "
                f"{limit} nodes x {cluster.gpus_per_node} GPUs = {limit * cluster.gpus_per_node} GPUs per "
                f"{cluster.switch_label} value",
                hint=f"shrink the group (e.g. {fits}) and add groups instead, or use mode: pool",
            )
    return most


def _largest_fitting(prefill: int, decode: int, gpus: int, per_node: int, limit: int) -> str:
    """A suggestion that keeps the prefill:decode ratio as far as it can."""
    best = (1, 1)
    for total in range(2, prefill + decode + 1):
        p = max(1, min(total - 1, round(total * prefill / (prefill + decode))))
        if nodes_for(total, gpus, per_node) <= limit:
            best = (p, total - p)
    if nodes_for(2, gpus, per_node) > limit:
        return "smaller replicas: even 1 prefill + 1 decode does not fit"
    return f"group: {{prefill: {best[0]}, decode: {best[1]}}}"
