"""Actuators the autoscaler and cutover use: the /scale subresource, and HTTPRoute weights.

Weights are changed with optimistic concurrency: the patch carries the resourceVersion that was read, so a
concurrent writer makes it fail with 409 instead of being overwritten; it is then re-read and retried.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from infctl.errors import KubeError
from infctl.kube.client import MERGE_PATCH, KubeClient
from infctl.manifests.kinds import lookup

_SCALABLE = {"Deployment": "apps/v1", "LeaderWorkerSet": "leaderworkerset.x-k8s.io/v1"}


def scale(client: KubeClient, kind: str, name: str, replicas: int, namespace: str | None = None) -> int:
    """Set ``replicas`` through ``<kind>/<name>/scale``; the replica count the server now holds."""
    ns = namespace or client.namespace
    entry = lookup(_SCALABLE.get(kind, ""), kind)
    if entry is None:
        raise KubeError(f"cannot scale a {kind}", hint=f"scalable kinds: {', '.join(_SCALABLE)}")
    if replicas < 0:
        raise KubeError(f"replicas must be >= 0, got {replicas}")
    path = entry.object_path(name, ns) + "/scale"
    result = client.request("PATCH", path, body={"spec": {"replicas": replicas}}, content_type=MERGE_PATCH)
    return int(result.get("spec", {}).get("replicas", replicas))


def set_weights(route: dict[str, Any], weights: Mapping[str, int]) -> dict[str, Any]:
    """A copy of ``route`` whose backendRefs named in ``weights`` carry the new weights (pure)."""
    out = copy.deepcopy(route)
    seen = set()
    for rule in out.get("spec", {}).get("rules", []):
        for ref in rule.get("backendRefs", []):
            if ref.get("name") in weights:
                ref["weight"] = int(weights[ref["name"]])
                seen.add(ref["name"])
    unknown = set(weights) - seen
    if unknown:
        raise KubeError(
            f"HTTPRoute {route['metadata']['name']} has no backendRef named {', '.join(sorted(unknown))}"
        )
    return out


def patch_httproute_weights(
    client: KubeClient,
    name: str,
    weights: Mapping[str, int],
    *,
    namespace: str | None = None,
    attempts: int = 3,
) -> dict[str, Any]:
    """Set backendRef weights of HTTPRoute ``name``; retried on a concurrent change, up to ``attempts``."""
    ns = namespace or client.namespace
    entry = lookup("gateway.networking.k8s.io/v1", "HTTPRoute")
    assert entry is not None
    path = entry.object_path(name, ns)
    for attempt in range(attempts):
        route = client.request("GET", path)
        updated = set_weights(route, weights)
        body = {
            "metadata": {"resourceVersion": route["metadata"]["resourceVersion"]},
            "spec": {"rules": updated["spec"]["rules"]},
        }
        try:
            return client.request("PATCH", path, body=body, content_type=MERGE_PATCH)
        except KubeError as err:
            if err.status != 409 or attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")
