"""PD groups as LeaderWorkerSet replicas, for the gang mechanisms that place an LWS group whole (``lws``,
``kueue``): every PD group is one replica of a LeaderWorkerSet whose pods are the group's engines.

LWS exclusive topology and Kueue's topology-aware scheduling both hold *one LWS group* under one switch;
neither can hold two workloads (a group's prefill and decode) together, and LWS's exclusive placement
repels every other LWS group in the namespace, which would split a group whose roles were separate sets.
So in these modes the group is the unit (LWS KEP-115: prefill and decode servers in one group):

- size ``(P + D) x n`` pods for P prefill and D decode replicas of n nodes each; ``subGroupPolicy``
  ``subGroupSize: n`` makes each engine replica a subgroup (pods labelled with their subgroup index);
- pod ``i`` (``LWS_WORKER_INDEX``) runs engine ``i // n`` as rank ``i % n``: engines ``0..P-1`` prefill,
  the rest decode; rank 0 serves HTTP, and a rank meets the rank 0 of its own subgroup, whose address
  follows LWS's naming (``<set>-<group>-<index>.<set>.<namespace>``, index 0 being the leader pod);
- ``lws``: the set is annotated ``leaderworkerset.sigs.k8s.io/exclusive-topology: <switch label>`` (a
  group alone under one switch) and, with ``subgroup_topology``, ``subgroup-exclusive-topology`` (each
  replica alone under one value of that label, e.g. an NVLink domain);
- ``kueue``: the set is labelled ``kueue.x-k8s.io/queue-name``; both templates carry
  ``kueue.x-k8s.io/podset-required-topology`` (or ``-preferred-``) on the switch label and one
  ``kueue.x-k8s.io/podset-group-name``, so Kueue admits a group whole and places leader and workers in one
  switch domain.

The router reads a pod's role and PD group from its layout annotation and the LWS labels
(``infctl.manifests.group_layout``), since one template cannot label its pods differently.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from infctl.config import DeploymentProfile
from infctl.errors import ConfigError
from infctl.manifests import labels as L
from infctl.manifests.drain import SUBGROUP, WAIT_IDLE_SUBGROUP
from infctl.manifests.engine import ENGINE_PORT, engine_values
from infctl.manifests.group_layout import (
    LAYOUT,
    LWS_GROUP_INDEX,
    LWS_WORKER_INDEX,
    Member,
    layout_value,
    member_of,
)
from infctl.manifests.placement import PlacementPlan, WorkloadPlan

LWS_EXCLUSIVE = "leaderworkerset.sigs.k8s.io/exclusive-topology"
LWS_SUBGROUP_EXCLUSIVE = "leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology"
KUEUE_QUEUE = "kueue.x-k8s.io/queue-name"
KUEUE_REQUIRED = "kueue.x-k8s.io/podset-required-topology"
KUEUE_PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
KUEUE_PODSET_GROUP = "kueue.x-k8s.io/podset-group-name"
KUEUE_LWS_NAME_MAX = 39
"""Longest LeaderWorkerSet name Kueue admits by default: it appends a group suffix to it in the
``kueue.x-k8s.io/pod-group-name`` label (63 characters)."""


def set_objects(profile: DeploymentProfile, w: WorkloadPlan) -> dict[str, Any]:
    """The LeaderWorkerSet-level values of a PD-group set: size, subgroup size, labels, annotations."""
    assert w.members is not None and profile.cluster is not None
    gang = profile.cluster.gang
    labels = dict(w.pod_labels)
    annotations = dict(w.annotations or {})
    template_annotations = {LAYOUT: layout_value(*w.members, w.nodes_per_replica)}
    if gang.scheduler == "lws":
        annotations[LWS_EXCLUSIVE] = profile.cluster.switch_label
        if gang.subgroup_topology is not None:
            annotations[LWS_SUBGROUP_EXCLUSIVE] = gang.subgroup_topology
    else:
        assert gang.queue_name is not None
        if len(w.name) > KUEUE_LWS_NAME_MAX:
            raise ConfigError(
                f"LeaderWorkerSet {w.name!r} is {len(w.name)} characters; Kueue names its pod groups after "
                f"it in a label, which allows {KUEUE_LWS_NAME_MAX}",
                hint="shorten the deployment's name (or its length pools' names)",
            )
        labels[KUEUE_QUEUE] = gang.queue_name
        key = KUEUE_REQUIRED if gang.topology == "required" else KUEUE_PREFERRED
        template_annotations[key] = profile.cluster.switch_label
        template_annotations[KUEUE_PODSET_GROUP] = w.name
    return {
        "size": sum(w.members) * w.nodes_per_replica,
        "sub_group_size": w.nodes_per_replica,
        "labels": labels,
        "annotations": annotations or None,
        "template_annotations": template_annotations,
    }


def _meta(label: str) -> str:
    """Prometheus's service-discovery name of a pod label."""
    return "__meta_kubernetes_pod_label_" + "".join(c if c.isalnum() else "_" for c in label)


def _pods(workload: str, indexes: range | list[int]) -> dict[str, Any]:
    """A relabeling's match on the pods of set ``workload`` at these LWS worker indexes."""
    regex = f"{workload};({'|'.join(str(i) for i in indexes)})"
    return {"sourceLabels": [_meta(L.WORKLOAD), _meta(LWS_WORKER_INDEX)], "regex": regex}


def relabelings(plan: PlacementPlan) -> list[dict[str, Any]]:
    """PodMonitor relabelings for the PD-group sets of ``plan``: scrape only each replica's rank 0 (the other
    ranks serve no HTTP), and give each series the role and group labels one template cannot put on the
    pods (``infctl_io_role``, ``infctl_io_group``, as the PodMonitor's podTargetLabels name them)."""
    out: list[dict[str, Any]] = []
    workload, group = _meta(L.WORKLOAD), _meta(LWS_GROUP_INDEX)
    for w in plan.workloads:
        if w.members is None:
            continue
        n, size = w.nodes_per_replica, sum(w.members) * w.nodes_per_replica
        prefill = w.members[0] * n

        if n > 1:
            out.append({**_pods(w.workload, [i for i in range(size) if i % n]), "action": "drop"})
        for role, indexes in (("prefill", range(prefill)), ("decode", range(prefill, size))):
            to = {"action": "replace", "targetLabel": "infctl_io_role", "replacement": role}
            out.append({**_pods(w.workload, indexes), **to})
        prefix = "" if w.length_pool is None else f"{w.length_pool}-"
        out.append(
            {
                "sourceLabels": [workload, group],
                "regex": f"{w.workload};([0-9]+)",
                "action": "replace",
                "targetLabel": "infctl_io_group",
                "replacement": f"{prefix}g$1",
            }
        )
    return out


def dispatch_values(profile: DeploymentProfile, w: WorkloadPlan, *, leader: bool) -> dict[str, Any]:
    """The pod values of a PD-group set's template (``leader``: the LWS leader, pod 0, always the first
    prefill engine's rank 0): one command that runs the pod's engine at its rank."""
    assert w.members is not None
    n = w.nodes_per_replica
    engine = replace(w, members=None)
    variants = {
        (role, rank0): engine_values(profile, replace(engine, role=role), leader=rank0)
        for role in ("prefill", "decode")
        for rank0 in ((True, False) if n > 1 else (True,))
    }
    values = dict(variants[("prefill", True)])
    if any(v["env"] != values["env"] for v in variants.values()):
        raise ConfigError(
            f"{profile.model.engine}'s prefill and decode engines need different environments, which one "
            "pod template of a PD-group set cannot give",
            hint="choose cluster.gang.scheduler volcano or scheduler-plugins",
        )
    if not leader:
        # A worker pod may be any engine's rank 0 or another rank: it offers every port they use, and
        # its probes and preStop look at its own engine's rank 0.
        values["ports"] = list({p["name"]: p for v in variants.values() for p in v["ports"]}.values())
        if n > 1:
            values["probes"] = rank0_probes(values["probes"], n)
            values["lifecycle"] = subgroup_lifecycle(values["lifecycle"], n)
    values["command"] = ["/bin/sh", "-c", dispatch_script(w.members[0], n, variants)]
    values["pod_annotations"] = {
        **values["pod_annotations"],
        **set_objects(profile, w)["template_annotations"],
    }
    return values


def dispatch_script(prefill: int, n: int, variants: Mapping[tuple[str, bool], dict[str, Any]]) -> str:
    """A POSIX shell script: rebase ``LWS_WORKER_INDEX`` and ``LWS_LEADER_ADDRESS`` to the pod's own
    subgroup (engine replica), then exec that engine's command for that rank."""
    lines = [
        "i=${LWS_WORKER_INDEX}",
        f"s=$((i / {n}))",
        "lead=${LWS_LEADER_ADDRESS}",
        f'[ "$s" -eq 0 ] || lead="${{LWS_LEADER_ADDRESS%%.*}}-$((s * {n})).${{LWS_LEADER_ADDRESS#*.}}"',
        f"export LWS_WORKER_INDEX=$((i % {n})) LWS_LEADER_ADDRESS=$lead",
    ]

    def run(role: str) -> str:
        if n == 1:
            return shell_line(variants[(role, True)]["command"])
        return (
            f'if [ "$LWS_WORKER_INDEX" -eq 0 ]; then {shell_line(variants[(role, True)]["command"])}; '
            f"else {shell_line(variants[(role, False)]['command'])}; fi"
        )

    lines.append(f'if [ "$s" -lt {prefill} ]; then {run("prefill")}; else {run("decode")}; fi')
    return "\n".join(lines)


_LWS_VARS = ("LWS_WORKER_INDEX", "LWS_LEADER_ADDRESS")


def shell_line(command: list[str]) -> str:
    """``exec`` of an engine command (argv, or ``/bin/sh -c`` text) with LWS's variables read by the shell
    (``${VAR}``, after the rebase) instead of expanded by Kubernetes (``$(VAR)``, the group's values)."""
    if command[:2] == ["/bin/sh", "-c"]:
        text = command[2]
        for var in _LWS_VARS:
            text = text.replace(f"'$({var})'", f"${{{var}}}").replace(f"$({var})", f"${{{var}}}")
        return text
    return "exec " + " ".join(_word(a) for a in command)


def _word(arg: str) -> str:
    if not any(f"$({v})" in arg for v in _LWS_VARS):
        return shlex.quote(arg)
    out = arg.replace("\\", "\\\\").replace('"', '\\"').replace("`", "\\`").replace("$", "\\$")
    for var in _LWS_VARS:
        out = out.replace(f"\\$({var})", f"${{{var}}}")
    return f'"{out}"'


RANK0_HTTP = """\
import os, sys, urllib.request
if int(os.environ["LWS_WORKER_INDEX"]) % int(sys.argv[1]):
    sys.exit(0)
urllib.request.urlopen("http://127.0.0.1:%s%s" % (sys.argv[2], sys.argv[3]), timeout=float(sys.argv[4]))
"""
"""argv: nodes per replica, port, path, timeout. A probe that checks the engine's HTTP health on rank 0 of a
replica and passes on the other ranks, which serve no HTTP (``LWS_WORKER_INDEX`` here is the group's)."""


def rank0_probes(probes: dict[str, Any], n: int) -> dict[str, Any]:
    """``probes`` with each ``httpGet`` replaced by :data:`RANK0_HTTP` run with the image's ``python3``."""
    out = {}
    for name, probe in probes.items():
        http = probe["httpGet"]
        timeout = str(probe.get("timeoutSeconds", 1))
        rest = {k: v for k, v in probe.items() if k != "httpGet"}
        port = _port_number(http["port"])
        argv = ["python3", "-c", RANK0_HTTP, str(n), str(port), http["path"], timeout]
        out[name] = {"exec": {"command": argv}, **rest}
    return out


def _port_number(port: object) -> int:
    return port if isinstance(port, int) else ENGINE_PORT


def subgroup_lifecycle(lifecycle: dict[str, Any], n: int) -> dict[str, Any]:
    """The preStop of a worker pod: wait on its own engine's rank 0 (``lws-subgroup:<n>``)."""
    command = list(lifecycle["preStop"]["exec"]["command"])
    command[2], command[3] = WAIT_IDLE_SUBGROUP, f"{SUBGROUP}{n}"
    return {"preStop": {"exec": {"command": command}}}


__all__ = [
    "KUEUE_PODSET_GROUP",
    "KUEUE_PREFERRED",
    "KUEUE_QUEUE",
    "KUEUE_REQUIRED",
    "LAYOUT",
    "LWS_EXCLUSIVE",
    "LWS_GROUP_INDEX",
    "LWS_SUBGROUP_EXCLUSIVE",
    "LWS_WORKER_INDEX",
    "Member",
    "dispatch_script",
    "dispatch_values",
    "layout_value",
    "member_of",
    "relabelings",
    "set_objects",
]
