"""kmock's KubernetesEmulator extended with what ``infctl deploy`` relies on from a real API server.

- server-side apply (PATCH ``application/apply-patch+yaml``) creates an absent object, as a real server does;
- ``dryRun=All`` answers with the would-be object and stores nothing;
- ``resourceVersion`` increases on every change, and a merge patch carrying a stale one gets 409;
- list requests honour ``labelSelector`` (equality terms);
- fields owned by another manager: ``conflicts`` names objects whose non-forced apply gets the 409 a real
  server sends;
- controllers: a workload reports ready once it has been read ``ready_after`` times (None: never).
"""

from __future__ import annotations

import copy
import re
from typing import Any

import aiohttp.web
import attrs
import kmock
from kmock._internal import rendering
from kmock._internal.k8s import KubernetesError

APPLY = "application/apply-patch+yaml"
NAMESPACE_PATH = re.compile(r"/api/v1/namespaces(?:/([^/]+))?")

RESOURCES: dict[str, tuple[str, bool, set[str]]] = {
    "v1/namespaces": ("Namespace", False, set()),
    "v1/serviceaccounts": ("ServiceAccount", True, set()),
    "v1/configmaps": ("ConfigMap", True, set()),
    "v1/services": ("Service", True, set()),
    "rbac.authorization.k8s.io/v1/roles": ("Role", True, set()),
    "rbac.authorization.k8s.io/v1/rolebindings": ("RoleBinding", True, set()),
    "policy/v1/poddisruptionbudgets": ("PodDisruptionBudget", True, set()),
    "apps/v1/deployments": ("Deployment", True, {"scale", "status"}),
    "leaderworkerset.x-k8s.io/v1/leaderworkersets": ("LeaderWorkerSet", True, {"scale", "status"}),
    "gateway.networking.k8s.io/v1/httproutes": ("HTTPRoute", True, {"status"}),
    "inference.networking.k8s.io/v1/inferencepools": ("InferencePool", True, {"status"}),
    "monitoring.coreos.com/v1/servicemonitors": ("ServiceMonitor", True, set()),
    "monitoring.coreos.com/v1/podmonitors": ("PodMonitor", True, set()),
    "monitoring.coreos.com/v1/prometheusrules": ("PrometheusRule", True, set()),
}


def merge(base: Any, patch: Any) -> Any:
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for k, v in patch.items():
            out[k] = merge(base.get(k), v)
        return out
    return copy.deepcopy(patch)


@attrs.define(kw_only=True)
class ClusterEmulator(kmock.KubernetesEmulator):
    ready_after: int | None = 0
    conflicts: set[tuple[str, str]] = attrs.field(factory=set)
    """(plural, name) of objects another field manager owns parts of."""
    without: set[str] = attrs.field(factory=set)
    """Resource keys (``group/version/plural``) the cluster does not serve: their CRD is missing."""
    namespaces: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    namespace_calls: list[tuple[str, str]] = attrs.field(factory=list)
    """(method, dryRun param) of requests on Namespace objects (kmock 0.8 cannot parse their paths)."""
    _version: int = 0
    _reads: dict[tuple[str, str], int] = attrs.field(factory=dict)

    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        match = NAMESPACE_PATH.fullmatch(raw_request.path)
        if match is None:
            return await super().__call__(raw_request)
        self.namespace_calls.append((raw_request.method, raw_request.query.get("dryRun", "")))
        name = match.group(1)
        if raw_request.method == "POST":
            body = await raw_request.json()
            if raw_request.query.get("dryRun") != "All":
                self.namespaces[body["metadata"]["name"]] = body
            return aiohttp.web.json_response(body, status=201)
        if name in self.namespaces:
            return aiohttp.web.json_response(self.namespaces[name])
        return await self._render_error(kmock.KubernetesObjectNotFoundError())

    def serve(self) -> None:
        for key, (kind, namespaced, subresources) in RESOURCES.items():
            if key not in self.without:
                self.resources[key] = kmock.ResourceInfo(
                    kind=kind, namespaced=namespaced, subresources=subresources
                )

    def _key(self, request: rendering.Request) -> Any:
        return (request.resource, request.namespace, request.name)

    def _stored(self, request: rendering.Request) -> dict[str, Any] | None:
        key = self._key(request)
        if key in self.objects and not self.objects[key].deleted:
            return dict(self.objects[key].raw)
        return None

    def _bump(self) -> str:
        self._version += 1
        return str(self._version)

    async def _handle(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        if request.resource is not None and self._unserved(request):
            return await self._render_error(kmock.KubernetesResourceNotFoundError())
        try:
            early = self._intercept(request)
        except KubernetesError as err:
            return await self._render_error(err)
        if early is not None:
            return aiohttp.web.json_response(early)
        return await super()._handle(request)

    def _unserved(self, request: rendering.Request) -> bool:
        r = request.resource
        assert r is not None
        key = f"{r.group}/{r.version}/{r.plural}" if r.group else f"{r.version}/{r.plural}"
        return key in self.without

    def _intercept(self, request: rendering.Request) -> dict[str, Any] | None:
        """Answer requests the base emulator gets wrong; None lets it handle the rest."""
        method = request.method.value
        live = self._stored(request) if request.name else None
        if method == "GET" and request.name and live is not None and request.resource is not None:
            self._maybe_ready(request, live)
        if method == "POST" and isinstance(request.data, dict):
            request.data.setdefault("metadata", {})["resourceVersion"] = self._bump()
            if request.params.get("dryRun") == "All":
                return dict(request.data)
        if method != "PATCH" or request.subresource == "scale" or not isinstance(request.data, dict):
            return None
        if request.headers.get("Content-Type", "").startswith(APPLY):
            plural = request.resource.plural if request.resource else ""
            if (plural, request.name) in self.conflicts and request.params.get("force") != "true":
                raise KubernetesError(409, "Conflict",
                                      f'Apply failed with 1 conflict: conflict with "kubectl-edit" using '
                                      f'{request.data.get("apiVersion")}: .spec.replicas')  # fmt: skip
            merged = merge(live or {}, request.data)
            if live is not None and merged == live:
                return live
            merged.setdefault("metadata", {})["resourceVersion"] = self._bump()
            if request.params.get("dryRun") == "All":
                return merged
            if live is None:
                self.objects[self._key(request)] = merged
                return merged
            request.data.setdefault("metadata", {})["resourceVersion"] = merged["metadata"]["resourceVersion"]
            return None
        expected = request.data.get("metadata", {}).get("resourceVersion")
        if live is not None and expected is not None and expected != live["metadata"].get("resourceVersion"):
            raise KubernetesError(409, "Conflict", "the object has been modified; please apply your changes "
                                  "to the latest version and try again")  # fmt: skip
        request.data.setdefault("metadata", {})["resourceVersion"] = self._bump()
        return None

    def _maybe_ready(self, request: rendering.Request, live: dict[str, Any]) -> None:
        kind = live.get("kind")
        if kind not in ("Deployment", "LeaderWorkerSet") or self.ready_after is None:
            return
        key = (kind, request.name or "")
        self._reads[key] = self._reads.get(key, 0) + 1
        if self._reads[key] > self.ready_after:
            n = live.get("spec", {}).get("replicas", 1)
            status = {"readyReplicas": n, "availableReplicas": n, "updatedReplicas": n, "replicas": n}
            self.objects[self._key(request)].patch({"status": status})

    async def _serve_list(self, request: rendering.Request) -> rendering.Payload:
        payload = await super()._serve_list(request)
        selector = request.params.get("labelSelector")
        if not selector or not isinstance(payload, dict):
            return payload
        terms = dict(t.split("=", 1) for t in selector.split(","))
        payload["items"] = [
            i for i in payload["items"]
            if all(i.get("metadata", {}).get("labels", {}).get(k) == v for k, v in terms.items())
        ]  # fmt: skip
        return payload
