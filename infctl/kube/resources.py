"""Paths and identities of objects, and the CRD check (a custom kind is served, or its CRD is missing)."""

from __future__ import annotations

from typing import Any

from infctl.errors import KubeError
from infctl.kube.client import KubeClient
from infctl.kube.errors import MissingCRDError
from infctl.manifests.kinds import Kind, kind_of

Obj = dict[str, Any]


def object_path(obj: Obj, namespace: str) -> str:
    return kind_of(obj).object_path(obj["metadata"]["name"], namespace)


def key(obj: Obj) -> tuple[str, str]:
    """(Kind, name): identity of an object within one release's namespace."""
    return str(obj["kind"]), str(obj["metadata"]["name"])


def served(client: KubeClient, kind: Kind) -> bool:
    """Whether the API server serves ``kind`` (discovery of its group/version)."""
    if kind.crd is None:
        return True
    try:
        resources = client.request("GET", f"/apis/{kind.api_version}").get("resources", [])
    except KubeError as err:
        if err.status == 404:
            return False
        raise
    return any(r.get("name") == kind.plural for r in resources)


def check_crds(client: KubeClient, objects: list[Obj]) -> None:
    """MissingCRDError naming every custom kind the cluster lacks and how to install it."""
    needed = {kind_of(o) for o in objects if kind_of(o).crd is not None}
    missing = sorted((k for k in needed if not served(client, k)), key=lambda k: k.kind)
    if not missing:
        return
    names = ", ".join(f"{k.kind} ({k.crd})" for k in missing)
    installs = list(dict.fromkeys(str(k.install) for k in missing))
    raise MissingCRDError(
        f"the cluster at {client.host} does not serve {names}: the CRD is not installed",
        hint="; then ".join(installs),
        status=404,
    )
