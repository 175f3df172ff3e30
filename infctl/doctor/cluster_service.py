"""Finding a release's daemon (router, autoscaler) on a cluster and reaching it through the API server.

What to look for comes from the profile's own rendering: the Service render gives the component, selected by
its labels (``infctl.io/release`` and ``app.kubernetes.io/component``), and its named port. The daemon is
then read through the API server's service proxy (``/api/v1/namespaces/NS/services/NAME:PORT/proxy/PATH``,
the URL kubectl's docs give for ``kubectl proxy``) with the client the cluster checks use, so no port-forward
and no route to the pod network is needed; the caller needs ``get`` on ``services/proxy``.
``autoscaler_cluster`` and ``router_cluster`` say what to check once it is found.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from infctl.config import DeploymentProfile
from infctl.doctor.cluster_probe import KubeFactory, KubeRequester
from infctl.doctor.result import CheckResult, Group, failed, passed, skipped
from infctl.errors import ConfigError, KubeError
from infctl.manifests import RenderOptions, render
from infctl.manifests import labels as L


@dataclass(frozen=True)
class Expected:
    """The Service a profile renders for one component."""

    component: str
    """``app.kubernetes.io/component``: ``router``, ``autoscaler``."""
    name: str
    selector: str
    """Label selector (``key=value,...``) its Service is listed by."""
    port: str
    """Its port's name, as the service proxy path takes it."""
    number: int
    """Its port's number, for the port-forward a fix suggests."""
    objects: tuple[dict[str, Any], ...] = field(default=(), repr=False, compare=False)
    """Everything the profile renders (what else a check needs to know, e.g. the admin Secret's name)."""


@dataclass(frozen=True)
class Found:
    """A component's Service as the cluster has it: where the proxy reaches it."""

    want: Expected
    namespace: str
    name: str

    @property
    def target(self) -> str:
        return f"svc/{self.name} -n {self.namespace}"

    def path(self, path: str) -> str:
        """The API server's proxy path to ``path`` on the Service's port."""
        ns, name, port = self.namespace, self.name, self.want.port
        return f"/api/v1/namespaces/{ns}/services/{name}:{port}/proxy/{path.lstrip('/')}"

    def forward(self, flag: str, *, then: str = "") -> str:
        """The port-forward that reaches it without the proxy, and doctor pointed at it with ``flag``
        (``then``: a command to run before doctor)."""
        port = self.want.number
        return (
            f"kubectl -n {self.namespace} port-forward svc/{self.name} {port} & {then}"
            f"infctl doctor {flag} http://127.0.0.1:{port}"
        )

    def proxy_fix(self, err: KubeError, flag: str, *, unready: str = "") -> str | None:
        """What to do when the API server refused or could not proxy a request to it (``unready``: what
        keeps the component's pods from being ready, said after the 503's fix)."""
        if err.status == 503:  # the API server's "no endpoints available for service": no ready pod
            describe = f"kubectl -n {self.namespace} describe deploy/{self.want.name}, then its logs"
            return f"no ready pod behind it{unready}: {describe}"
        if err.status == 403:
            return f"your user may not get services/proxy in {self.namespace}; {self.forward(flag)}"
        return err.hint or self.forward(flag)


def expected_service(
    profile: DeploymentProfile, namespace: str, component: str, port: str
) -> Expected | str | None:
    """The Service ``profile`` renders for ``component`` (its port named ``port``), why it cannot say
    (the profile does not render), or None: it renders no such Service."""
    try:
        objects = render(profile, RenderOptions(namespace=namespace))
    except ConfigError as err:
        return f"profile {profile.name} does not render ({err.message})"
    wanted = {L.RELEASE: profile.name, L.COMPONENT: component}
    for obj in objects:
        labels = obj.get("metadata", {}).get("labels") or {}
        if obj.get("kind") == "Service" and wanted.items() <= labels.items():
            ports = {str(p.get("name")): int(p.get("port", 0)) for p in obj.get("spec", {}).get("ports", [])}
            chosen = port if port in ports else next(iter(ports), port)
            selector = ",".join(f"{k}={v}" for k, v in wanted.items())
            name = str(obj["metadata"]["name"])
            return Expected(component, name, selector, chosen, ports.get(chosen, 0), tuple(objects))
    return None


Checks = Callable[[KubeRequester, str], Awaitable[list[CheckResult]]]


async def on_cluster(
    factory: KubeFactory, profile: DeploymentProfile, namespace: str | None, run: Checks
) -> list[CheckResult]:
    """``run(client, namespace)`` with a client from ``factory``, closed after; the namespace is the one
    asked for, else the profile's, else the kubeconfig context's."""
    client = await asyncio.to_thread(factory)
    try:
        return await run(client, namespace or profile.namespace or client.namespace)
    finally:
        client.close()


async def find_service(
    client: KubeRequester, group: Group, want: Expected, ns: str
) -> tuple[CheckResult, Found | None]:
    """The ``service`` finding, and the Service when the cluster has one labelled as render labels it."""
    t = f"svc/{want.name} -n {ns}"
    query = {"labelSelector": want.selector}
    try:
        listed = await asyncio.to_thread(
            partial(client.request, "GET", f"/api/v1/namespaces/{ns}/services", query=query)
        )
    except KubeError as err:
        if err.status is None:  # the cluster group reports an unreachable API server
            return skipped(group, "service", f"not looked for: {err.message}", target=t), None
        if err.status != 404:  # 404: an API server that has never seen a Service in this namespace
            return failed(group, "service", f"cannot list Services: {err.message}", err.hint, target=t), None
        listed = {}
    services = [s for s in listed.get("items", []) if isinstance(s, dict)]
    if not services:
        summary = (
            f"{want.component} on, but no Service labelled {want.selector} in namespace {ns} "
            f"(render names it {want.name})"
        )
        fix = "deploy the release (infctl deploy -f PROFILE), or name its namespace (-n)"
        return failed(group, "service", summary, fix, target=t), None
    found = Found(want, ns, str(services[0].get("metadata", {}).get("name", want.name)))
    summary = f"found Service {found.name} (port {want.port})"
    return passed(group, "service", summary, target=found.target), found


async def locate(
    client: KubeRequester, group: Group, want: Expected | str, ns: str, *, release: str, then: str
) -> tuple[list[CheckResult], Found | None]:
    """The ``service`` finding for ``want`` (a reason string: the profile renders none, so it is not looked
    for), with the next check, ``then``, skipped when there is nothing to read; and the Service found."""
    if isinstance(want, str):
        return [skipped(group, "service", f"{want}: not looked for", target=f"release {release}")], None
    service, found = await find_service(client, group, want, ns)
    if found is None:
        nothing = skipped(group, then, f"no {want.component} Service to read", target=service.target)
        return [service, nothing], None
    return [service], found
