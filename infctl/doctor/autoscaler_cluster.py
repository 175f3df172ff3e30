"""Finding a release's autoscaler on a cluster and checking it as ``--autoscaler URL`` would.

Its Service is the one render labels ``app.kubernetes.io/component=autoscaler``, port ``metrics``
(templates/autoscaler.yaml.j2); its ``/metrics`` text is read through the API server's service proxy
(``cluster_service``) and judged by the start-up check ``--autoscaler URL`` runs.
"""

from __future__ import annotations

import asyncio
from functools import partial

from infctl.config import DeploymentProfile
from infctl.doctor.autoscaler_eval import G
from infctl.doctor.autoscaler_probe import checks_from_text
from infctl.doctor.cluster_probe import KubeFactory, KubeRequester
from infctl.doctor.cluster_service import Expected, expected_service, locate, on_cluster
from infctl.doctor.result import CheckResult, failed
from infctl.errors import KubeError

PORT_NAME = "metrics"
"""The autoscaler Service's port (templates/autoscaler.yaml.j2)."""


def expected_autoscaler(profile: DeploymentProfile, namespace: str) -> Expected | str:
    """The autoscaler Service ``profile`` renders, or why it renders none (the autoscaler is off)."""
    if not profile.autoscaler.enabled:
        return f"off in profile {profile.name} (autoscaler.enabled: false)"
    found = expected_service(profile, namespace, "autoscaler", PORT_NAME)
    return found or (
        f"profile {profile.name} renders no autoscaler: no workload is left for it to scale "
        "(fixed replicas, or KEDA scales them)"
    )


async def check_cluster_autoscaler(
    factory: KubeFactory, profile: DeploymentProfile, namespace: str | None = None
) -> list[CheckResult]:
    """The release's autoscaler Service found on the cluster, and the start-up check on its /metrics."""

    async def run(client: KubeRequester, ns: str) -> list[CheckResult]:
        want = expected_autoscaler(profile, ns)
        results, found = await locate(client, G, want, ns, release=profile.name, then="startup")
        if found is None:
            return results
        t = found.target
        try:
            text = await asyncio.to_thread(partial(client.request_text, "GET", found.path("metrics")))
        except KubeError as err:
            fix = found.proxy_fix(err, "--autoscaler")
            return [*results, failed(G, "startup", f"GET /metrics: {err.message}", fix, target=t)]
        return [*results, *checks_from_text(text, target=t)]

    return await on_cluster(factory, profile, namespace, run)
