"""A release on a cluster: deploy (ordered apply, wait, prune), diff, status, delete.

Order: namespace, then by phase (RBAC and config, engines, router, autoscaler, traffic, monitoring, see
``infctl.manifests.kinds.PHASE_NAMES``). With waiting on, the engines must be ready before the router is
applied, and the router before traffic moves to it. Deletion runs the phases in reverse.
"""

from __future__ import annotations

import difflib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import groupby
from typing import Any

import yaml

from infctl.kube.apply import Applied, DryRun, apply_object, ensure_namespace, get_or_none
from infctl.kube.client import KubeClient
from infctl.kube.prune import delete_object, list_release, stale
from infctl.kube.resources import Obj, check_crds, object_path
from infctl.kube.secrets import AdminSecret, ensure_admin_secret
from infctl.kube.wait import Readiness, readiness, wait_ready
from infctl.manifests.admin_secret import admin_secret_ref
from infctl.manifests.kinds import PHASE_NAMES
from infctl.manifests.render import phase_of

WAIT_AFTER = (2, 3)
"""Phases whose workloads must be ready before the next phase is applied: engines, router."""


@dataclass(frozen=True)
class DeployOptions:
    force: bool = False
    """Take over fields another manager owns (server-side apply ``force``)."""
    dry_run: DryRun = "none"
    """client: read the cluster, write nothing; server: the server validates and discards every write."""
    wait: bool = True
    """Wait for engines, then the router, to be ready before applying what comes after them."""
    timeout_s: float = 1800.0
    """Deadline for all waiting together, seconds."""
    interval_s: float = 2.0
    """Poll interval while waiting, seconds."""
    prune: bool = True
    """Delete objects labelled with this release that are no longer rendered."""


@dataclass
class DeployReport:
    release: str
    namespace: str
    dry_run: DryRun
    namespace_created: bool = False
    applied: list[Applied] = field(default_factory=list)
    pruned: list[tuple[str, str]] = field(default_factory=list)
    readiness: list[Readiness] = field(default_factory=list)
    admin_secret: AdminSecret | None = None
    """The router's admin-token Secret (None: no router rendered)."""


Event = Callable[[str, Any], None]
"""Progress: ``("secret", AdminSecret)``, ``("phase", name)``, ``("applied", Applied)``,
``("waiting", [Readiness])``, ``("pruned", (kind, name))``."""


def deploy_release(
    client: KubeClient,
    objects: list[Obj],
    *,
    release: str,
    namespace: str,
    options: DeployOptions = DeployOptions(),
    on_event: Event | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> DeployReport:
    """Apply ``objects`` in phase order, waiting and pruning as ``options`` say.

    The router's admin-token Secret is made sure of before anything is applied (created with a random
    token when missing, see :mod:`infctl.kube.secrets`), so the router's pods find it when they start."""
    emit = on_event or (lambda kind, data: None)
    report = DeployReport(release, namespace, options.dry_run)
    check_crds(client, objects)
    report.namespace_created = ensure_namespace(client, namespace, dry_run=options.dry_run)
    ref = admin_secret_ref(objects)
    if ref is not None:
        report.admin_secret = ensure_admin_secret(client, ref, release=release, dry_run=options.dry_run)
        emit("secret", report.admin_secret)
    deadline = clock() + options.timeout_s
    for phase, group in groupby(objects, key=phase_of):
        batch = list(group)
        emit("phase", PHASE_NAMES[phase])
        for obj in batch:
            applied = apply_object(client, obj, namespace, force=options.force, dry_run=options.dry_run)
            report.applied.append(applied)
            emit("applied", applied)
        if options.wait and options.dry_run == "none" and phase in WAIT_AFTER:
            report.readiness += wait_ready(
                client, batch, namespace, timeout_s=max(deadline - clock(), 0.0),
                interval_s=options.interval_s, on_progress=lambda states: emit("waiting", states),
                clock=clock, sleep=sleep,
            )  # fmt: skip
    if options.prune:
        for obj in sorted(
            stale(list_release(client, release, namespace), objects), key=phase_of, reverse=True
        ):
            if options.dry_run == "client" or delete_object(
                client, obj, namespace, dry_run=options.dry_run == "server"
            ):
                report.pruned.append((obj["kind"], obj["metadata"]["name"]))
                emit("pruned", report.pruned[-1])
    return report


@dataclass(frozen=True)
class ObjectDiff:
    kind: str
    name: str
    action: str
    """create, update, unchanged or delete."""
    diff: str


_VOLATILE_META = ("managedFields", "resourceVersion", "uid", "generation", "creationTimestamp")


def comparable(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` without status and server-maintained metadata (pure)."""
    out = {k: v for k, v in obj.items() if k != "status"}
    meta = {k: v for k, v in obj.get("metadata", {}).items() if k not in _VOLATILE_META}
    return {**out, "metadata": meta}


def unified(before: dict[str, Any] | None, after: dict[str, Any] | None, label: str) -> str:
    def lines(o: dict[str, Any] | None) -> list[str]:
        return [] if o is None else yaml.safe_dump(comparable(o), sort_keys=True).splitlines(keepends=True)

    return "".join(difflib.unified_diff(lines(before), lines(after), f"live/{label}", f"rendered/{label}"))


def diff_release(client: KubeClient, objects: list[Obj], *, release: str, namespace: str) -> list[ObjectDiff]:
    """What deploy would change: a server-side dry-run apply of each object compared with the live one."""
    check_crds(client, objects)
    out: list[ObjectDiff] = []
    for obj in objects:
        kind, name = obj["kind"], obj["metadata"]["name"]
        label = f"{kind}/{name}"
        live = get_or_none(client, object_path(obj, namespace))
        if live is None:
            out.append(ObjectDiff(kind, name, "create", unified(None, obj, label)))
            continue
        merged = apply_object(client, obj, namespace, dry_run="server").object
        text = unified(live, merged, label)
        out.append(ObjectDiff(kind, name, "update" if text else "unchanged", text))
    for obj in stale(list_release(client, release, namespace), objects):
        label = f"{obj['kind']}/{obj['metadata']['name']}"
        out.append(ObjectDiff(obj["kind"], obj["metadata"]["name"], "delete", unified(obj, None, label)))
    return out


def release_status(client: KubeClient, *, release: str, namespace: str) -> list[Readiness]:
    """Every object of the release with its readiness, in apply order."""
    return [readiness(o) for o in sorted(list_release(client, release, namespace), key=phase_of)]


def delete_release(
    client: KubeClient,
    *,
    release: str,
    namespace: str,
    dry_run: DryRun = "none",
    on_event: Event | None = None,
) -> list[tuple[str, str]]:
    """Delete every object labelled with ``release``, traffic first and engines last. The namespace stays."""
    deleted = []
    for obj in sorted(list_release(client, release, namespace), key=phase_of, reverse=True):
        if dry_run == "client" or delete_object(client, obj, namespace, dry_run=dry_run == "server"):
            deleted.append((obj["kind"], obj["metadata"]["name"]))
            if on_event is not None:
                on_event("deleted", deleted[-1])
    return deleted
