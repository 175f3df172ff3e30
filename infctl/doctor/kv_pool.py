"""KV pool reachable: a TCP connection to every address the profile's engines use for their pool (the Mooncake
master and its HTTP metadata service, or the LMCache server), from where doctor runs.

A pool infctl renders is addressed by its Services' cluster DNS names, which resolve only inside the cluster:
from outside, an unresolvable name is a warning with the way to check it, not a failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket

from infctl.config import DeploymentProfile
from infctl.doctor.result import CheckResult, Group, failed, passed, warned
from infctl.engines import kv_pool
from infctl.manifests.kv_pool import with_pool_address

G: Group = "engines"
NAME = "kv pool"


def pool_targets(profile: DeploymentProfile, namespace: str) -> list[kv_pool.PoolEndpoint]:
    """The addresses engines of ``profile`` reach their pool at (a rendered pool's Service names included)."""
    return kv_pool.endpoints(with_pool_address(profile, profile.namespace or namespace).model)


def _rendered(profile: DeploymentProfile) -> bool:
    off = profile.model.kv_offload
    return off is not None and off.pool is not None and off.pool.servers is not None


async def check_kv_pool(profile: DeploymentProfile, namespace: str, *, timeout_s: float) -> list[CheckResult]:
    """One finding per pool address: connected, refused or silent, or (a rendered pool seen from outside the
    cluster) not resolvable here."""
    results = []
    for ep in pool_targets(profile, namespace):
        target = f"{ep.host}:{ep.port}"
        error = await _connect(ep.host, ep.port, timeout_s)
        if error is None:
            results.append(passed(G, NAME, f"{ep.name} accepts connections at {target}", target=target))
        elif isinstance(error, socket.gaierror) and _rendered(profile):
            service = ep.host.split(".", 1)[0]
            results.append(
                warned(
                    G,
                    NAME,
                    f"{ep.name} {target}: a cluster DNS name this machine cannot resolve ({error.strerror})",
                    f"run doctor inside the cluster, or `kubectl -n {profile.namespace or namespace} "
                    f"port-forward svc/{service} {ep.port}` and connect to 127.0.0.1:{ep.port}",
                    target=target,
                )
            )
        else:
            why = "no answer" if isinstance(error, TimeoutError) else str(error) or type(error).__name__
            fix = (
                f"check that the {profile.name}-kv-* pods run (kubectl get pods -l "
                "app.kubernetes.io/component=kv-pool) and that the engines' network may reach them"
                if _rendered(profile)
                else "start the pool server there, or correct model.kv_offload.pool.address: engines that "
                "cannot reach it fail to start"
            )
            results.append(failed(G, NAME, f"{ep.name} at {target}: {why}", fix, target=target))
    return results


async def _connect(host: str, port: int, timeout_s: float) -> BaseException | None:
    try:
        async with asyncio.timeout(timeout_s):
            _, writer = await asyncio.open_connection(host, port)
    except (OSError, TimeoutError) as err:
        return err
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return None
