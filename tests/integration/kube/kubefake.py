"""kmock's KubernetesEmulator extended with what ``infctl deploy`` relies on from a real API server.

- server-side apply (PATCH ``application/apply-patch+yaml``) creates an absent object, as a real server does;
- ``dryRun=All`` answers with the would-be object and stores nothing;
- ``resourceVersion`` increases on every change, and a merge patch carrying a stale one gets 409;
- list requests honour ``labelSelector`` (equality terms) and answer the collection's ``resourceVersion``;
- watches as a real server serves them: every change event carries a new ``resourceVersion``; a watch from
  a version replays what happened since, one from none (or ``0``) starts with the current objects as ADDED;
  ``labelSelector`` filters events; ``timeoutSeconds`` ends the request (with a BOOKMARK first when
  ``allowWatchBookmarks``); a version older than :meth:`ClusterEmulator.compact` left gets 410 Gone (an
  ERROR event, or the HTTP status with ``gone_as_status``). ``lists`` and ``watches`` record the query
  parameters of each such request. Objects created by server-side apply make no events (kmock's own path);
- fields owned by another manager: ``conflicts`` names objects whose non-forced apply gets the 409 a real
  server sends;
- controllers: a workload reports ready once it has been read ``ready_after`` times (None: never);
- the service proxy (``GET .../services/NAME[:PORT]/proxy/PATH``): 404 for a Service not stored, 503 "no
  endpoints available" for one without an entry in ``endpoints``, else the request forwarded to that URL
  (status, body and content type passed through, as the API server passes a pod's answer).
"""

from __future__ import annotations

import asyncio
import base64
import collections
import copy
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp.web
import attrs
import kmock
from kmock._internal import aiobus, enums, rendering
from kmock._internal.k8s import KubernetesError

from infctl.kube import KubeClient

APPLY = "application/apply-patch+yaml"
NAMESPACE_PATH = re.compile(r"/api/v1/namespaces(?:/([^/]+))?")

RESOURCES: dict[str, tuple[str, bool, set[str]]] = {
    "v1/namespaces": ("Namespace", False, set()),
    "v1/pods": ("Pod", True, {"status"}),
    "v1/serviceaccounts": ("ServiceAccount", True, set()),
    "v1/configmaps": ("ConfigMap", True, set()),
    "v1/secrets": ("Secret", True, set()),
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


def selects(selector: str | None, obj: dict[str, Any]) -> bool:
    """Whether ``obj`` matches a label selector of equality terms (``a=b,c=d``)."""
    if not selector:
        return True
    terms = dict(t.split("=", 1) for t in selector.split(","))
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in terms.items())


@attrs.define(eq=False)
class LoggedBus(aiobus.Bus[Any]):
    """kmock's per-resource event bus, stamping each event with the next resourceVersion and keeping it."""

    cluster: ClusterEmulator | None = None
    history: list[tuple[int, dict[str, Any]]] = attrs.field(factory=list)

    async def put(self, *items: Any) -> None:
        assert self.cluster is not None
        stamped = [self.cluster.stamp(item) for item in items]
        self.history.extend((int(e["object"]["metadata"]["resourceVersion"]), e) for e in stamped)
        await super().put(*stamped)


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
    gone_as_status: bool = False
    """Answer a too-old watch with HTTP 410 instead of a 200 stream holding a 410 ERROR event."""
    compacted: int = 0
    """Watches from a resourceVersion below this get 410 Gone (see :meth:`compact`)."""
    lists: list[dict[str, str]] = attrs.field(factory=list)
    """Query parameters of every list request."""
    watches: list[dict[str, str]] = attrs.field(factory=list)
    """Query parameters of every watch request."""
    endpoints: dict[tuple[str, str], str] = attrs.field(factory=dict)
    """(namespace, Service name) -> base URL of the ready pod behind it, for the service proxy."""
    proxy_denied: set[str] = attrs.field(factory=set)
    """Namespaces where the caller may not use the service proxy (RBAC: no ``get services/proxy``)."""
    _version: int = 0
    _logged: int = 0
    _reads: dict[tuple[str, str], int] = attrs.field(factory=dict)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self._buses = collections.defaultdict(lambda: LoggedBus(cluster=self))

    def compact(self) -> None:
        """Forget the change history, as etcd compaction does: resuming from any older version gets 410."""
        self.compacted = self._version
        for bus in self._buses.values():
            bus.history.clear()

    def stamp(self, event: dict[str, Any]) -> dict[str, Any]:
        """``event`` with its object's resourceVersion: the change's own, else (deletions) a new one."""
        obj = copy.deepcopy(event["object"])
        meta = obj.setdefault("metadata", {})
        rv = str(meta.get("resourceVersion", ""))
        if not rv.isdigit() or int(rv) <= self._logged:
            rv = self._bump()
        meta["resourceVersion"] = rv
        self._logged = int(rv)
        return {"type": event["type"], "object": obj}

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
        if request.resource is not None and request.resource.plural == "services":
            head, _, rest = (request.subresource or "").partition("/")
            if head == "proxy" and request.name:
                return await self._proxy(request, rest)
        if self.gone_as_status and request.action == enums.action.WATCH and self._too_old(request):
            self.watches.append(dict(request.params))
            return await self._render_error(KubernetesError(410, "Expired", "too old resource version"))
        try:
            early = self._intercept(request)
        except KubernetesError as err:
            return await self._render_error(err)
        if early is not None:
            return aiohttp.web.json_response(early)
        return await super()._handle(request)

    async def _proxy(self, request: rendering.Request, path: str) -> aiohttp.web.StreamResponse:
        """The API server's service proxy: the request sent on to the pod behind the Service."""
        name = (request.name or "").split(":")[0]
        if request.namespace in self.proxy_denied:  # RBAC runs before the Service is looked up
            verb = "get" if request.method.value == "GET" else "create"
            message = (
                f'services "{request.name}" is forbidden: User "doctor" cannot {verb} resource '
                f'"services/proxy" in API group "" in the namespace "{request.namespace}"'
            )
            return await self._render_error(KubernetesError(403, "Forbidden", message))
        key = (request.resource, request.namespace, name)
        if key not in self.objects or self.objects[key].deleted:
            return await self._render_error(kmock.KubernetesObjectNotFoundError())
        url = self.endpoints.get((request.namespace or "", name))
        if url is None:
            message = f'no endpoints available for service "{name}"'
            return await self._render_error(KubernetesError(503, "ServiceUnavailable", message))
        target = f"{url.rstrip('/')}/{path}"
        # The pod gets the body and query, and no Authorization: the real server drops it once it has
        # authenticated the caller (k8s.io/apiserver pkg/endpoints/filters/authentication.go).
        kind = request.headers.get("Content-Type")
        forwarded = {"Content-Type": kind} if request.body and kind else {}
        async with (
            aiohttp.ClientSession() as http,
            http.request(
                request.method.value,
                target,
                data=request.body or None,
                headers=forwarded,
                params=request.params,
            ) as answer,
        ):
            body = await answer.read()
            kind = answer.headers.get("Content-Type", "application/octet-stream")
        return aiohttp.web.Response(body=body, status=answer.status, headers={"Content-Type": kind})

    def _unserved(self, request: rendering.Request) -> bool:
        assert request.resource is not None
        return _key_of(request.resource) in self.without

    def _intercept(self, request: rendering.Request) -> dict[str, Any] | None:
        """Answer requests the base emulator gets wrong; None lets it handle the rest."""
        method = request.method.value
        live = self._stored(request) if request.name else None
        if method == "GET" and request.name and live is not None and request.resource is not None:
            self._maybe_ready(request, live)
        if method == "POST" and isinstance(request.data, dict):
            if live is None and request.name is None and self._exists(request):
                raise KubernetesError(409, "AlreadyExists", "the object already exists")
            request.data.setdefault("metadata", {})["resourceVersion"] = self._bump()
            if request.data.get("kind") == "Secret":
                _encode_string_data(request.data)
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

    def _exists(self, request: rendering.Request) -> bool:
        """Whether the object a create (POST to the collection) names is stored already."""
        name = request.data.get("metadata", {}).get("name") if isinstance(request.data, dict) else None
        key = (request.resource, request.namespace, name)
        return key in self.objects and not self.objects[key].deleted

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
        self.lists.append(dict(request.params))
        payload = await super()._serve_list(request)
        if not isinstance(payload, dict):
            return payload
        payload["metadata"] = {"resourceVersion": str(self._version)}
        selector = request.params.get("labelSelector")
        payload["items"] = [i for i in payload["items"] if selects(selector, i)]
        return payload

    def _too_old(self, request: rendering.Request) -> bool:
        since = request.params.get("resourceVersion", "")
        return since.isdigit() and since != "0" and int(since) < self.compacted

    def _wanted(self, request: rendering.Request, event: dict[str, Any]) -> bool:
        meta = event["object"].get("metadata") or {}
        in_namespace = request.namespace is None or meta.get("namespace") == request.namespace
        return in_namespace and selects(request.params.get("labelSelector"), event["object"])

    async def _serve_watch(self, request: rendering.Request) -> AsyncIterator[rendering.Payload]:
        self.watches.append(dict(request.params))
        yield b""  # the headers go out now, as a real server's do
        assert request.resource is not None
        bus = self._buses[request.resource]
        since = request.params.get("resourceVersion", "")
        async with self._lock:  # events are put under this lock: the backlog and the marker meet exactly
            marker = await bus.mark()
            if since.isdigit() and since != "0":
                backlog = [e for rv, e in bus.history if rv > int(since)]
            else:
                backlog = [{"type": "ADDED", "object": o.raw} for (r, _, _), o in self.objects.items()
                           if r == request.resource and not o.deleted]  # fmt: skip
        try:
            if self._too_old(request):
                status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 410,
                          "reason": "Expired", "message": f"too old resource version: {since}"}  # fmt: skip
                yield {"type": "ERROR", "object": status}
                return
            for event in backlog:
                if self._wanted(request, event):
                    yield event
            async for event in _until(bus.stream(since=marker), request.params.get("timeoutSeconds")):
                if self._wanted(request, event):
                    yield event
            if request.params.get("allowWatchBookmarks") == "true":
                meta = {"resourceVersion": str(self._logged)}
                kind = RESOURCES.get(_key_of(request.resource), ("",))[0]
                yield {"type": "BOOKMARK", "object": {"kind": kind, "metadata": meta}}
        finally:
            await bus.unmark(marker)


def _encode_string_data(secret: dict[str, Any]) -> None:
    """As a real API server stores a Secret: ``stringData`` merged into base64 ``data``."""
    plain = secret.pop("stringData", None) or {}
    encoded = {k: base64.b64encode(str(v).encode()).decode() for k, v in plain.items()}
    secret["data"] = {**secret.get("data", {}), **encoded}


def _key_of(r: Any) -> str:
    """``group/version/plural`` (core: ``version/plural``), as RESOURCES and ``without`` spell it."""
    return f"{r.group}/{r.version}/{r.plural}" if r.group else f"{r.version}/{r.plural}"


async def _until(events: AsyncIterator[Any], timeout_s: str | None) -> AsyncIterator[Any]:
    """``events`` until ``timeout_s`` (a watch's ``timeoutSeconds``) has passed; forever without one."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + float(timeout_s) if timeout_s else None
    while True:
        remaining = None if deadline is None else deadline - loop.time()
        if remaining is not None and remaining <= 0:
            return
        try:
            yield await asyncio.wait_for(anext(events), remaining)
        except (TimeoutError, StopAsyncIteration):
            return


@dataclass
class FakeCluster:
    """What the ``cluster`` fixture (tests/integration/kube/conftest.py) yields: the emulator, an infctl
    client connected to it and its URL. Here, not in the conftest: tests import it by a unique module name
    (``from conftest import`` takes whichever conftest pytest loaded last)."""

    api: ClusterEmulator
    client: KubeClient
    url: str
