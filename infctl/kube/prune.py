"""Objects labelled with a release that it no longer renders: find them (label-selected lists) and delete."""

from __future__ import annotations

from typing import Any

from infctl.errors import KubeError
from infctl.kube.client import KubeClient
from infctl.kube.resources import Obj, key, served
from infctl.manifests import labels as L
from infctl.manifests.kinds import KINDS, Kind


def list_release(client: KubeClient, release: str, namespace: str) -> list[Obj]:
    """Every object of ``release`` in ``namespace``, across the kinds infctl renders (apply order)."""
    selector = L.release_selector(release)
    found: list[Obj] = []
    for kind in KINDS:
        if not kind.namespaced or not served(client, kind):
            continue
        try:
            listing = client.request(
                "GET", kind.collection_path(namespace), query={"labelSelector": selector}
            )
        except KubeError as err:
            if err.status == 404:
                continue
            raise
        for item in listing.get("items", []):
            found.append({**item, "apiVersion": kind.api_version, "kind": kind.kind})
    return found


def stale(live: list[Obj], rendered: list[Obj]) -> list[Obj]:
    """Live objects not among ``rendered`` (pure)."""
    keep = {key(o) for o in rendered}
    return [o for o in live if key(o) not in keep]


def delete_object(client: KubeClient, obj: Obj, namespace: str, *, dry_run: bool = False) -> bool:
    """Delete one object (children in the background); False when it was already gone."""
    kind = _kind(obj)
    query = {"propagationPolicy": "Background", **({"dryRun": "All"} if dry_run else {})}
    try:
        client.request("DELETE", kind.object_path(obj["metadata"]["name"], namespace), query=query)
    except KubeError as err:
        if err.status == 404:
            return False
        raise
    return True


def _kind(obj: dict[str, Any]) -> Kind:
    return next(k for k in KINDS if k.kind == obj["kind"] and k.api_version == obj["apiVersion"])
