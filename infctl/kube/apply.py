"""Server-side apply: one PATCH per object with ``application/apply-patch+yaml``, field manager ``infctl``.

Conflicts (another manager owns a field) come back as 409 and become :class:`ApplyConflictError` with the
server's message; ``force`` takes the fields over. Workloads an autoscaler owns keep their live replica
count: once such an object exists, ``spec.replicas`` is left out of the applied body so neither manager
fights the other.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Literal

from infctl.errors import KubeError
from infctl.kube.client import APPLY_PATCH, JSON, KubeClient
from infctl.kube.errors import ApplyConflictError
from infctl.kube.resources import Obj, object_path
from infctl.manifests import labels as L

FIELD_MANAGER = L.MANAGER
DryRun = Literal["none", "client", "server"]


@dataclass(frozen=True)
class Applied:
    kind: str
    name: str
    action: Literal["created", "configured", "unchanged", "would apply"]
    object: dict[str, Any]


def apply_object(
    client: KubeClient, obj: Obj, namespace: str, *, force: bool = False, dry_run: DryRun = "none"
) -> Applied:
    """Apply ``obj``; what the server now holds (or, with ``dry_run``, would hold)."""
    kind, name = obj["kind"], obj["metadata"]["name"]
    if dry_run == "client":
        return Applied(kind, name, "would apply", obj)
    path = object_path(obj, namespace)
    live = get_or_none(client, path)
    body = without_owned_replicas(obj) if live is not None else obj
    query = {"fieldManager": FIELD_MANAGER, "force": "true" if force else "false"}
    if dry_run == "server":
        query["dryRun"] = "All"
    try:
        result = client.request("PATCH", path, query=query, body=body, content_type=APPLY_PATCH)
    except KubeError as err:
        if err.status == 409:
            raise ApplyConflictError(
                f"{kind}/{name}: {err.message}",
                status=409,
                hint="another field manager owns these fields; --force-conflicts takes them over",
            ) from None
        raise
    if dry_run == "server":
        return Applied(kind, name, "would apply", result)
    if live is None:
        return Applied(kind, name, "created", result)
    same = live.get("metadata", {}).get("resourceVersion") == result.get("metadata", {}).get(
        "resourceVersion"
    )
    return Applied(kind, name, "unchanged" if same else "configured", result)


def without_owned_replicas(obj: Obj) -> Obj:
    """``obj`` minus ``spec.replicas`` when the autoscaler owns it."""
    if obj.get("metadata", {}).get("annotations", {}).get(L.AUTOSCALED) != "true":
        return obj
    out = copy.deepcopy(obj)
    out.get("spec", {}).pop("replicas", None)
    return out


def get_or_none(client: KubeClient, path: str) -> dict[str, Any] | None:
    try:
        return client.request("GET", path)
    except KubeError as err:
        if err.status == 404:
            return None
        raise


def ensure_namespace(client: KubeClient, namespace: str, *, dry_run: DryRun = "none") -> bool:
    """Create ``namespace`` when missing (no release label: never pruned). True if it was created."""
    if get_or_none(client, f"/api/v1/namespaces/{namespace}") is not None:
        return False
    if dry_run == "client":
        return True
    body = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": namespace, "labels": {L.MANAGED_BY: L.MANAGER}},
    }
    query = {"dryRun": "All"} if dry_run == "server" else None
    client.request("POST", "/api/v1/namespaces", query=query, body=body, content_type=JSON)
    return True
