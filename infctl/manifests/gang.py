"""Gang placement of PD groups: one PodGroup per group, so its pods are scheduled all at once or not at all.

Pod affinity alone (``cluster.gang.scheduler: affinity``) keeps a group under one switch but schedules its
pods one by one: when the switch runs out of room half-way, the pods already placed hold GPUs the group
cannot use. With a gang scheduler every pod of PD group ``gN`` (prefill and decode, leaders and workers of
multi-node replicas) belongs to PodGroup ``<release>-gN`` whose ``minMember`` is the group's pod count, and
the scheduler binds none of them until all fit. The switch stays a required pod affinity, which both
schedulers honour; Volcano can also hold the group inside one HyperNode tier (``network_tier``).

- ``volcano``: ``scheduling.volcano.sh/v1beta1`` PodGroup; pods annotated ``scheduling.k8s.io/group-name``
  and scheduled by ``volcano``.
- ``scheduler-plugins``: ``scheduling.x-k8s.io/v1alpha1`` PodGroup (the coscheduling plugin); pods labelled
  ``scheduling.x-k8s.io/pod-group`` and scheduled by the scheduler-plugins scheduler.

Pure: :func:`pod_group_of` says what each pod template gets, :func:`pod_groups` the objects to apply.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from infctl.config import DeploymentProfile
from infctl.manifests import labels as L
from infctl.manifests.placement import PlacementPlan, WorkloadPlan

VOLCANO_API = "scheduling.volcano.sh/v1beta1"
COSCHEDULING_API = "scheduling.x-k8s.io/v1alpha1"
VOLCANO_GROUP = "scheduling.k8s.io/group-name"
"""Pod annotation naming its Volcano PodGroup."""
COSCHEDULING_GROUP = "scheduling.x-k8s.io/pod-group"
"""Pod label naming its coscheduling PodGroup."""


@dataclass(frozen=True)
class PodMembership:
    """What a pod template of a gang-scheduled group carries."""

    scheduler_name: str
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)


def group_name(release: str, group: str) -> str:
    return f"{release}-{group}"


def pod_group_of(profile: DeploymentProfile, w: WorkloadPlan) -> PodMembership | None:
    """The PodGroup membership of ``w``'s pods; None without a gang scheduler or outside a PD group."""
    gang = profile.cluster.gang if profile.cluster is not None else None
    scheduler = gang.pod_scheduler if gang is not None else None
    if gang is None or scheduler is None or w.group is None:
        return None
    name = group_name(profile.name, w.group)
    if gang.scheduler == "volcano":
        return PodMembership(scheduler, annotations={VOLCANO_GROUP: name})
    return PodMembership(scheduler, labels={COSCHEDULING_GROUP: name})


def pod_groups(profile: DeploymentProfile, plan: PlacementPlan, namespace: str) -> list[dict[str, Any]]:
    """One PodGroup per PD group, ``minMember`` every pod of it; none without a gang scheduler."""
    gang = profile.cluster.gang if profile.cluster is not None else None
    if gang is None or gang.scheduler not in ("volcano", "scheduler-plugins"):
        return []
    members: dict[str, int] = {}
    for w in plan.workloads:
        if w.group is not None:
            members[w.group] = members.get(w.group, 0) + w.replicas * w.nodes_per_replica
    labels = {**L.release_labels(profile.name, "engine", profile.model.engine)}
    out = []
    for group, count in members.items():
        spec: dict[str, Any] = {"minMember": count}
        if gang.scheduler == "volcano":
            api = VOLCANO_API
            if gang.queue is not None:
                spec["queue"] = gang.queue
            if gang.network_tier is not None:
                spec["networkTopology"] = {"mode": "hard", "highestTierAllowed": gang.network_tier}
        else:
            api = COSCHEDULING_API
            if gang.schedule_timeout_s is not None:
                spec["scheduleTimeoutSeconds"] = gang.schedule_timeout_s
        out.append(
            {
                "apiVersion": api,
                "kind": "PodGroup",
                "metadata": {
                    "name": group_name(profile.name, group),
                    "namespace": namespace,
                    "labels": {**labels, L.GROUP: group},
                },
                "spec": spec,
            }
        )
    return out
