"""Running doctor: the request's checks, planned into the registry and run concurrently.

``run_doctor`` is the async core (``DoctorRequest`` -> ``DoctorReport``); :func:`doctor` is the one sync
wrapper, for the CLI. Network clients come from :class:`DoctorDeps`, so tests inject transports, a fake
API server's client factory and port probes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial

import httpx

from infctl.doctor import local
from infctl.doctor.autoscaler_cluster import check_cluster_autoscaler
from infctl.doctor.autoscaler_probe import check_autoscaler
from infctl.doctor.cluster_probe import KubeFactory, check_cluster
from infctl.doctor.engine_probe import check_engine
from infctl.doctor.kv_pool import check_kv_pool
from infctl.doctor.registry import DEFAULT_TIMEOUT_S, Check, run_checks
from infctl.doctor.result import CheckResult, DoctorReport, failed
from infctl.doctor.router_cluster import check_cluster_router
from infctl.doctor.router_eval import evaluate_profile_policy
from infctl.doctor.router_probe import check_router
from infctl.doctor.targets import DoctorRequest
from infctl.engines.kv_pool import pool_kind as kv_pool_kind
from infctl.local import port_is_free
from infctl.local.paths import resolve_run_dir
from infctl.local.procs import pid_alive
from infctl.telemetry import make_client


@dataclass(frozen=True)
class DoctorDeps:
    """What doctor talks through; the defaults are the real network, kubeconfig and process table."""

    transport: httpx.AsyncBaseTransport | None = None
    """HTTP transport for engine and router probes; None: real HTTP."""
    kube: KubeFactory | None = None
    """Builds the Kubernetes client; None: cluster checks say they cannot run."""
    is_free: Callable[[int], bool] = port_is_free
    """Whether a local port can be bound."""
    alive: local.Alive = pid_alive
    """Whether a recorded (pid, start time) still runs."""
    kv_wait_s: float = 3.0
    """Longest wait for a KV event batch after the provoking request, seconds (capped by the timeout)."""


Findings = Callable[[], Awaitable[list[CheckResult]]]


def _sync(fn: Callable[[], CheckResult | Sequence[CheckResult]]) -> Findings:
    """A check whose work is quick and local (files, ports, the profile), as the registry runs checks."""

    async def run() -> list[CheckResult]:
        out = fn()
        return [out] if isinstance(out, CheckResult) else list(out)

    return run


def local_checks(request: DoctorRequest, deps: DoctorDeps) -> list[Check]:
    run_dir = request.run_dir or resolve_run_dir()
    profile, release = request.profile, request.local_release
    checks = []
    if profile is not None and profile.target == "local":
        checks += [
            Check(
                "local",
                "ports",
                _sync(lambda: local.check_ports(profile, run_dir, is_free=deps.is_free, alive=deps.alive)),
            ),
            Check("local", "executables", _sync(lambda: local.check_executables(profile, run_dir))),
        ]
    name = release or (profile.name if profile is not None and profile.target == "local" else None)
    if name is not None:
        checks.append(
            Check(
                "local",
                "release",
                _sync(
                    lambda: local.check_release(run_dir, name, required=release is not None, alive=deps.alive)
                ),
            )
        )
    checks.append(
        Check(
            "local",
            "stale releases",
            _sync(lambda: local.check_stale_releases(run_dir, skip=name, alive=deps.alive)),
        )
    )
    return checks


def plan_checks(
    request: DoctorRequest,
    deps: DoctorDeps,
    client: httpx.AsyncClient,
    *,
    kv_wait_s: float,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> list[Check]:
    """Every check the request asks for, in display order."""
    checks = local_checks(request, deps) if request.checks_local else []
    profile = request.profile
    if request.checks_cluster:
        kube = deps.kube
        missing = failed("cluster", "api", "no Kubernetes client factory given", "pass DoctorDeps(kube=...)")
        run = partial(check_cluster, kube, profile, request.namespace) if kube else _sync(lambda: missing)
        checks.append(Check("cluster", "api", run, "kubeconfig"))
    checks += [
        Check("engines", "engine", partial(check_engine, client, t, kv_wait_s=kv_wait_s), t.url)
        for t in request.engines
    ]
    if profile is not None and kv_pool_kind(profile.model) is not None:
        namespace = request.namespace or "default"
        pool = partial(check_kv_pool, profile, namespace, timeout_s=max(0.5, timeout_s / 2))
        checks.append(Check("engines", "kv pool", pool, "kv_offload.pool"))
    if profile is not None:
        checks.append(Check("router", "policy", _sync(lambda: evaluate_profile_policy(profile))))
    if request.router is not None:
        router = request.router
        checks.append(Check("router", "router", partial(check_router, client, router), router.url))
    elif request.checks_cluster and profile is not None and deps.kube is not None:
        # No URL given: the release's own router, found by the Service its profile renders.
        find_router = partial(check_cluster_router, deps.kube, profile, request.namespace)
        checks.append(Check("router", "service", find_router, f"release {profile.name}"))
    if request.autoscaler is not None:
        url = request.autoscaler
        checks.append(Check("autoscaler", "startup", partial(check_autoscaler, client, url), url))
    elif request.checks_cluster and profile is not None and deps.kube is not None:
        # No URL given: the release's own autoscaler, found by the Service its profile renders.
        find = partial(check_cluster_autoscaler, deps.kube, profile, request.namespace)
        checks.append(Check("autoscaler", "service", find, f"release {profile.name}"))
    return checks


async def run_doctor(
    request: DoctorRequest, deps: DoctorDeps | None = None, *, timeout_s: float = DEFAULT_TIMEOUT_S
) -> DoctorReport:
    """Run every check of ``request`` at once, each within ``timeout_s``."""
    deps = deps or DoctorDeps()
    kv_wait = min(deps.kv_wait_s, timeout_s / 2)
    async with make_client(deps.transport, timeout=max(1.0, timeout_s / 2)) as client:
        checks = plan_checks(request, deps, client, kv_wait_s=kv_wait, timeout_s=timeout_s)
        return await run_checks(checks, timeout_s=timeout_s)


def doctor(
    request: DoctorRequest, deps: DoctorDeps | None = None, *, timeout_s: float = DEFAULT_TIMEOUT_S
) -> DoctorReport:
    """The one sync entry point (the CLI's)."""
    return asyncio.run(run_doctor(request, deps, timeout_s=timeout_s))
