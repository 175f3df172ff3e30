"""Finding a release's autoscaler on a cluster and checking it as ``--autoscaler URL`` would.

What to look for comes from the profile's own rendering: the autoscaler's Service, selected by the labels
render gives it (``infctl.io/release`` and ``app.kubernetes.io/component=autoscaler``), and its port named
``metrics``. The ``/metrics`` text is read through the API server's service proxy
(``/api/v1/namespaces/NS/services/NAME:PORT/proxy/metrics``, the URL kubectl's docs give for ``kubectl
proxy``) with the same client the cluster checks use, so no port-forward and no route to the pod network is
needed; the caller needs ``get`` on ``services/proxy``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from functools import partial

from infctl.config import DeploymentProfile
from infctl.doctor.autoscaler_eval import G
from infctl.doctor.autoscaler_probe import startup_from_text
from infctl.doctor.cluster_probe import KubeFactory, KubeRequester
from infctl.doctor.result import CheckResult, failed, passed, skipped
from infctl.errors import ConfigError, KubeError
from infctl.manifests import RenderOptions, render
from infctl.manifests import labels as L

PORT_NAME = "metrics"
"""The autoscaler Service's port (templates/autoscaler.yaml.j2)."""


@dataclass(frozen=True)
class Expected:
    """The autoscaler Service a profile renders."""

    name: str
    selector: str
    """Label selector (``key=value,...``) its Service is listed by."""
    port: str
    """Its port's name (``metrics``), as the service proxy path takes it."""
    number: int
    """Its port's number, for the port-forward a fix suggests."""


def expected_service(profile: DeploymentProfile, namespace: str) -> Expected | str:
    """The autoscaler Service ``profile`` renders, or why it renders none (the autoscaler is off)."""
    if not profile.autoscaler.enabled:
        return f"off in profile {profile.name} (autoscaler.enabled: false)"
    try:
        objects = render(profile, RenderOptions(namespace=namespace))
    except ConfigError as err:
        return f"profile {profile.name} does not render ({err.message})"
    wanted = {L.RELEASE: profile.name, L.COMPONENT: "autoscaler"}
    for obj in objects:
        labels = obj.get("metadata", {}).get("labels") or {}
        if obj.get("kind") == "Service" and wanted.items() <= labels.items():
            ports = {str(p.get("name")): int(p.get("port", 0)) for p in obj.get("spec", {}).get("ports", [])}
            port = PORT_NAME if PORT_NAME in ports else next(iter(ports), PORT_NAME)
            selector = ",".join(f"{k}={v}" for k, v in wanted.items())
            return Expected(str(obj["metadata"]["name"]), selector, port, ports.get(port, 0))
    return (
        f"profile {profile.name} renders no autoscaler: no workload is left for it to scale "
        "(fixed replicas, or KEDA scales them)"
    )


async def check_cluster_autoscaler(
    factory: KubeFactory, profile: DeploymentProfile, namespace: str | None = None
) -> list[CheckResult]:
    """The release's autoscaler Service found on the cluster, and the start-up check on its /metrics."""
    client = await asyncio.to_thread(factory)
    try:
        ns = namespace or profile.namespace or client.namespace
        expected = expected_service(profile, ns)
        if isinstance(expected, str):
            return [skipped(G, "service", f"{expected}: not looked for", target=f"release {profile.name}")]
        return await _check(client, expected, ns)
    finally:
        client.close()


async def _check(client: KubeRequester, want: Expected, ns: str) -> list[CheckResult]:
    t = f"svc/{want.name} -n {ns}"
    query = {"labelSelector": want.selector}
    try:
        listed = await asyncio.to_thread(
            partial(client.request, "GET", f"/api/v1/namespaces/{ns}/services", query=query)
        )
    except KubeError as err:
        if err.status is None:  # the cluster group reports an unreachable API server
            return [skipped(G, "service", f"not looked for: {err.message}", target=t)]
        if err.status != 404:  # 404: an API server that has never seen a Service in this namespace
            return [failed(G, "service", f"cannot list Services: {err.message}", err.hint, target=t)]
        listed = {}
    services = [s for s in listed.get("items", []) if isinstance(s, dict)]
    if not services:
        return [
            failed(
                G,
                "service",
                f"autoscaler on, but no Service labelled {want.selector} in namespace {ns} "
                f"(render names it {want.name})",
                "deploy the release (infctl deploy -f PROFILE), or name its namespace (-n)",
                target=t,
            ),
            skipped(G, "startup", "autoscaler not found", target=t),
        ]
    name = str(services[0].get("metadata", {}).get("name", want.name))
    t = f"svc/{name} -n {ns}"
    path = f"/api/v1/namespaces/{ns}/services/{name}:{want.port}/proxy/metrics"
    found = passed(G, "service", f"found Service {name} (port {want.port})", target=t)
    try:
        text = await asyncio.to_thread(partial(client.request_text, "GET", path))
    except KubeError as err:
        return [
            found,
            failed(G, "startup", f"GET /metrics: {err.message}", _proxy_fix(err, want, name, ns), target=t),
        ]
    return [found, startup_from_text(text, target=t)]


def _proxy_fix(err: KubeError, want: Expected, name: str, ns: str) -> str | None:
    port = want.number
    forward = (
        f"kubectl -n {ns} port-forward svc/{name} {port}; infctl doctor --autoscaler http://127.0.0.1:{port}"
    )
    if err.status == 503:  # the API server's "no endpoints available for service": no ready pod behind it
        return f"no ready pod behind it: kubectl -n {ns} describe deploy/{want.name}, then its logs"
    if err.status == 403:
        return f"your user may not get services/proxy here; {forward}"
    return err.hint or forward
