"""Reading the cluster for doctor: version, nodes, API discovery and access reviews, through an injected
client factory (``infctl.kube.connect`` in the CLI, a client of a fake API server in tests).

Only ``infctl.kube`` imports ``kubernetes``; here the client is anything with ``request(method, path,
body=...)`` (and ``request_text`` for answers that are not JSON, such as a pod's /metrics through the API
server's proxy; ``request_raw`` for a pod's answers whatever their status) that raises
:class:`~infctl.errors.KubeError`. Its calls block, so they run in threads.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any, Protocol

from infctl.config import DeploymentProfile
from infctl.doctor import cluster_eval as ev
from infctl.doctor.crds import DISCOVERED, evaluate_crds
from infctl.doctor.gang import KUEUE_APIS, KueueObjects, evaluate_kueue, evaluate_subgroup_label
from infctl.doctor.gang import needs as gang_needs
from infctl.doctor.nodes import node_views
from infctl.doctor.pods import engine_selector, evaluate_engine_pods
from infctl.doctor.result import CheckResult, failed, skipped, warned
from infctl.doctor.topology import evaluate_gang, evaluate_rdma, evaluate_switch_capacity
from infctl.errors import ConfigError, KubeError
from infctl.manifests import KINDS, Kind, RenderOptions, kind_of, render

VERBS = ("get", "list", "create", "patch", "delete")
"""What deploy does to each kind: server-side apply (create, patch), wait (get, list), prune (delete)."""
NODE_CHECKS = ("gpu nodes", "switch label", "switch capacity", "rdma")
SSAR = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
UNREACHABLE_FIX = "check the kubeconfig context (--context) and that the cluster is up"


class KubeRequester(Protocol):
    """What doctor needs of a Kubernetes client (``infctl.kube.KubeClient`` is one)."""

    @property
    def namespace(self) -> str: ...
    @property
    def host(self) -> str: ...
    def request(
        self, method: str, path: str, *, query: dict[str, str] | None = None, body: Any = None
    ) -> dict[str, Any]: ...
    def request_text(self, method: str, path: str, *, query: dict[str, str] | None = None) -> str: ...
    def request_raw(
        self, method: str, path: str, *, query: dict[str, str] | None = None, body: Any = None
    ) -> tuple[int, str, bytes]: ...
    def close(self) -> None: ...


KubeFactory = Callable[[], KubeRequester]


async def check_cluster(
    factory: KubeFactory,
    profile: DeploymentProfile | None,
    namespace: str | None = None,
    *,
    concurrency: int = 8,
) -> list[CheckResult]:
    """Every cluster finding; when the API server cannot be reached, that one failure alone."""
    client = await asyncio.to_thread(factory)
    try:
        return await _check(client, profile, namespace, asyncio.Semaphore(concurrency))
    finally:
        client.close()


async def _check(
    client: KubeRequester, profile: DeploymentProfile | None, namespace: str | None, gate: asyncio.Semaphore
) -> list[CheckResult]:

    async def call(
        method: str, path: str, body: Any = None, query: dict[str, str] | None = None
    ) -> dict[str, Any]:
        async with gate:
            return await asyncio.to_thread(partial(client.request, method, path, query=query, body=body))

    t = client.host
    try:
        version = await call("GET", "/version")
    except KubeError as err:
        return [failed("cluster", "api", err.message, err.hint or UNREACHABLE_FIX, target=t)]
    ns = namespace or (profile.namespace if profile is not None else None) or client.namespace
    kinds, needed, render_error = _rendered(profile, ns)
    nodes, served, groups, access, proxy = await asyncio.gather(
        _nodes(call),
        _discover(call),
        _groups(call),
        _access(call, kinds, ns),
        _proxy_access(call, profile, ns),
    )
    results = [
        ev.evaluate_version(version, target=t),
        *render_error,
        ev.evaluate_permissions(access, ns, proxy=proxy, target=t),
        *evaluate_crds(served, needed, target=t),
    ]
    if isinstance(nodes, KubeError):
        results.append(
            warned(
                "cluster",
                "gpu nodes",
                f"cannot list nodes: {nodes.message}",
                "use a context allowed to list nodes (a ClusterRole with get, list on nodes)",
                target=t,
            )
        )
        results += [skipped("cluster", name, "nodes not readable", target=t) for name in NODE_CHECKS[1:]]
    else:
        views = node_views(nodes)
        results += [
            ev.evaluate_gpu_nodes(views, profile, target=t),
            ev.evaluate_switch_label(views, profile, target=t),
            evaluate_switch_capacity(views, profile, target=t),
            evaluate_rdma(views, profile, target=t),
        ]
    results.append(evaluate_gang(profile, target=t))
    views = [] if isinstance(nodes, KubeError) else node_views(nodes)
    subgroup = evaluate_subgroup_label(views, profile, target=t)
    results += [subgroup] if subgroup is not None else []
    if profile is not None and gang_needs(profile):
        results += evaluate_kueue(await _kueue(call, profile, ns), views, profile, ns, target=t)
    results.append(ev.evaluate_metrics_apis(groups, target=t))
    if profile is not None:
        results.append(await _engine_pods(call, profile.name, ns, t))
    return results


async def _engine_pods(call: Call, release: str, namespace: str, target: str) -> CheckResult:
    path = f"/api/v1/namespaces/{namespace}/pods"
    try:
        items = (await call("GET", path, query={"labelSelector": engine_selector(release)})).get("items", [])
    except KubeError as err:
        if err.status == 404:  # an API server that has never seen a pod in this namespace
            items = []
        else:
            found = f"cannot list pods: {err.message}"
            return warned("cluster", "engine pods", found, err.hint, target=target)
    return evaluate_engine_pods([i for i in items if isinstance(i, dict)], release, namespace, target=target)


Call = Callable[..., Any]


def _rendered(
    profile: DeploymentProfile | None, namespace: str
) -> tuple[list[Kind], set[tuple[str, str]] | None, list[CheckResult]]:
    """Kinds to review access for, (apiVersion, plural) the release needs, a finding if it won't render."""
    core = [k for k in KINDS if k.crd is None]
    if profile is None:
        return core, None, []
    try:
        objects = render(profile, RenderOptions(namespace=namespace))
    except ConfigError as err:
        target = f"profile {profile.name}"
        return core, None, [failed("cluster", "manifests", err.message, err.hint, target=target)]
    kinds = list({kind_of(o): None for o in objects})
    return kinds, {(k.api_version, k.plural) for k in kinds} | gang_needs(profile), []


async def _kueue(call: Call, profile: DeploymentProfile, namespace: str) -> KueueObjects:
    """Kueue's Topologies, ResourceFlavors and the profile's LocalQueue, at the newest version served."""
    assert profile.cluster is not None
    queue = profile.cluster.gang.queue_name
    for api in KUEUE_APIS:
        try:
            topologies = (await call("GET", f"/apis/{api}/topologies")).get("items", [])
            flavors = (await call("GET", f"/apis/{api}/resourceflavors")).get("items", [])
        except KubeError as err:
            if err.status == 404:
                continue
            raise
        try:
            found = await call("GET", f"/apis/{api}/namespaces/{namespace}/localqueues/{queue}")
        except KubeError as err:
            if err.status != 404:
                raise
            found = None
        return KueueObjects(topologies, flavors, found)
    return KueueObjects((), (), None)


async def _nodes(call: Call) -> list[dict[str, Any]] | KubeError:
    try:
        items = (await call("GET", "/api/v1/nodes")).get("items", [])
    except KubeError as err:
        return err
    return [i for i in items if isinstance(i, dict)]


async def _plurals(call: Call, api_version: str) -> set[str]:
    try:
        resources = (await call("GET", f"/apis/{api_version}")).get("resources", [])
    except KubeError as err:
        if err.status == 404:
            return set()
        raise
    return {str(r.get("name")) for r in resources if "/" not in str(r.get("name"))}


async def _discover(call: Call) -> dict[str, set[str]]:
    """apiVersion (or bare group: all its versions) -> plurals served."""
    served: dict[str, set[str]] = {}
    for api in DISCOVERED:
        if "/" in api:
            served[api] = await _plurals(call, api)
            continue
        versions = await _group_versions(call, api)
        served[api] = set().union(*[await _plurals(call, v) for v in versions])
    return served


async def _group_versions(call: Call, group: str) -> list[str]:
    try:
        body = await call("GET", f"/apis/{group}")
    except KubeError as err:
        if err.status == 404:
            return []
        raise
    return [str(v.get("groupVersion")) for v in body.get("versions", []) if isinstance(v, dict)]


async def _groups(call: Call) -> set[str]:
    body = await call("GET", "/apis")
    return {str(g.get("name")) for g in body.get("groups", []) if isinstance(g, dict)}


async def _access(call: Call, kinds: Iterable[Kind], namespace: str) -> dict[ev.Access, bool]:
    asks = [(verb, k) for k in kinds for verb in VERBS if k.namespaced or verb != "delete"]

    async def review(verb: str, kind: Kind) -> bool:
        attrs = {"verb": verb, "group": kind.group, "resource": kind.plural}
        if kind.namespaced:
            attrs["namespace"] = namespace
        return await _allowed(call, attrs)

    allowed = await asyncio.gather(*(review(v, k) for v, k in asks))
    return {(v, k.group, k.plural): ok for (v, k), ok in zip(asks, allowed, strict=True)}


async def _proxy_access(call: Call, profile: DeploymentProfile | None, namespace: str) -> bool | None:
    """Whether doctor may reach the release's router and autoscaler through the API server's service
    proxy (``get services/proxy``, as ``kubectl auth can-i get services/proxy`` asks); None: no profile,
    so nothing is read that way."""
    if profile is None:
        return None
    attrs = {"verb": "get", "group": "", "resource": "services", "subresource": "proxy"}
    return await _allowed(call, {**attrs, "namespace": namespace})


async def _allowed(call: Call, attrs: dict[str, str]) -> bool:
    body = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": attrs},
    }
    answer = await call("POST", SSAR, body)
    return bool((answer.get("status") or {}).get("allowed", False))
