"""The HTTPRoute backend: weights on the route's backendRefs, cutover state in its annotations, writes guarded
by ``metadata.resourceVersion`` (a merge patch carrying it gets 409 when someone changed the route since)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from infctl.cutover.backends import Observed, stale_error
from infctl.cutover.errors import CutoverError
from infctl.cutover.state import PREFIX
from infctl.errors import KubeError
from infctl.kube import KubeClient, set_weights
from infctl.kube.client import MERGE_PATCH
from infctl.manifests.kinds import lookup


@dataclass
class HTTPRouteBackend:
    client: KubeClient
    name: str
    namespace: str
    _route: dict[str, Any] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"HTTPRoute {self.namespace}/{self.name}"

    @property
    def path(self) -> str:
        entry = lookup("gateway.networking.k8s.io/v1", "HTTPRoute")
        assert entry is not None
        return entry.object_path(self.name, self.namespace)

    async def read(self) -> Observed:
        try:
            self._route = await asyncio.to_thread(self.client.request, "GET", self.path)
        except KubeError as err:
            if err.status == 404:
                hint = "check --httproute NAME and -n NAMESPACE (infctl deploy names it after the profile)"
                raise CutoverError(f"{self.where} not found", hint=hint) from None
            raise
        return _observed(self._route)

    async def write(
        self, weights: Mapping[str, int], annotations: Mapping[str, str], expected_version: str
    ) -> Observed:
        current = self._route.get("metadata", {}).get("annotations") or {}
        patch_annotations: dict[str, str | None] = {k: None for k in current if k.startswith(PREFIX)}
        patch_annotations.update(annotations)
        updated = set_weights(self._route, weights)
        body = {"metadata": {"resourceVersion": expected_version, "annotations": patch_annotations},
                "spec": {"rules": updated["spec"]["rules"]}}  # fmt: skip
        try:
            self._route = await asyncio.to_thread(
                self.client.request, "PATCH", self.path, body=body, content_type=MERGE_PATCH
            )
        except KubeError as err:
            if err.status != 409:
                raise
            now = await self.read()
            raise stale_error(self.where, expected_version, now, _last_manager(self._route)) from None
        return _observed(self._route)


def _observed(route: Mapping[str, Any]) -> Observed:
    weights: dict[str, float] = {}
    for rule in route.get("spec", {}).get("rules", []):
        for ref in rule.get("backendRefs", []):
            weights.setdefault(str(ref["name"]), float(ref.get("weight", 1)))
    meta = route.get("metadata", {})
    annotations = {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()}
    return Observed(weights, annotations, str(meta.get("resourceVersion", "")), tuple(weights))


def _last_manager(route: Mapping[str, Any]) -> str:
    """The field manager of the latest change (real API servers record it in managedFields)."""
    fields = [f for f in route.get("metadata", {}).get("managedFields") or [] if f.get("time")]
    if not fields:
        return ""
    last = max(fields, key=lambda f: str(f["time"]))
    return f"its latest change was by field manager {last.get('manager', '?')!r} at {last['time']}"
