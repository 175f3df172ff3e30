"""Finding a release's router on a cluster and checking it as ``--router URL`` would.

Its Service is the one render labels ``app.kubernetes.io/component=router``, port ``http``
(templates/router.yaml.j2). The router probe runs unchanged over :class:`ServiceProxyTransport`: health,
readiness and ``/metrics`` come through the API server's service proxy, and so does the admin API's answer
to a request without a token (401: guarded, as it should be). The admin token cannot come along, since the
API server drops the ``Authorization`` header (see ``proxy_transport``), so backends, signals and policy are
left to a port-forward, which the fix spells out with the command that reads the token from the release's
admin Secret (``infctl.manifests.admin_secret``; reading it needs ``get`` on ``secrets``).
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from functools import partial

from infctl.config import DeploymentProfile
from infctl.doctor.cluster_probe import KubeFactory, KubeRequester
from infctl.doctor.cluster_service import Expected, Found, expected_service, locate, on_cluster
from infctl.doctor.pods import engine_selector
from infctl.doctor.proxy_transport import ServiceProxyTransport
from infctl.doctor.result import CheckResult, Group, failed
from infctl.doctor.router_probe import ADMIN_TOKEN_ENV, check_router
from infctl.doctor.targets import RouterTarget
from infctl.errors import KubeError
from infctl.manifests.admin_secret import admin_secret_ref
from infctl.telemetry import make_client

G: Group = "router"
PORT_NAME = "http"
"""The router Service's port (templates/router.yaml.j2)."""


def expected_router(profile: DeploymentProfile, namespace: str) -> Expected | str:
    """The router Service ``profile`` renders, or why it renders none (the router is off)."""
    if not profile.router.enabled:
        return f"off in profile {profile.name} (router.enabled: false)"
    return expected_service(profile, namespace, "router", PORT_NAME) or (
        f"profile {profile.name} renders no router Service"
    )


async def check_cluster_router(
    factory: KubeFactory, profile: DeploymentProfile, namespace: str | None = None
) -> list[CheckResult]:
    """The release's router Service found on the cluster, and the router checks through the API server."""

    async def run(client: KubeRequester, ns: str) -> list[CheckResult]:
        results, found = await locate(
            client, G, expected_router(profile, ns), ns, release=profile.name, then="health"
        )
        if found is None:
            return results
        try:  # the API server's own refusals (403, 503 no endpoints) have fixes of their own
            await asyncio.to_thread(partial(client.request_text, "GET", found.path("health")))
        except KubeError as err:
            unready = f" (a router is ready once an engine is in rotation: kubectl -n {ns} get pods -l "
            unready += f"{engine_selector(profile.name)})"
            fix = found.proxy_fix(err, "--router", unready=unready)
            return [*results, failed(G, "health", f"GET /health: {err.message}", fix, target=found.target)]
        base = f"http://{found.name}.{ns}.svc:{found.want.number}"
        async with make_client(ServiceProxyTransport(client, found, base)) as http:
            checked = await check_router(http, RouterTarget(base), token_fix=_token_fix(found))
        return [*results, *(replace(r, target=found.target) for r in checked)]

    return await on_cluster(factory, profile, namespace, run)


def _token_fix(found: Found) -> str:
    """How to run the admin checks, whose token the API server's proxy cannot carry."""
    why = "the API server's proxy drops the Authorization header the admin token goes in"
    ref = admin_secret_ref(found.want.objects)
    if ref is None:
        return f"{why}: {found.forward('--router', then=f'export {ADMIN_TOKEN_ENV}=TOKEN; ')}"
    token = f"export {ADMIN_TOKEN_ENV}=$({ref.read_command()}); "
    return f"{why}: {found.forward('--router', then=token)} (reading Secret {ref.name} needs get on secrets)"
