"""Building the backend and the gate source a command names (``--router``, ``--httproute``, ``--prometheus``).

The one place cutover's network clients are made: an httpx client from the telemetry factory (tests pass a
``transport``), and the Kubernetes client from ``kube_connect`` (tests point it at a fake API server).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

import httpx

from infctl.cutover.backends import RouterBackend, TrafficBackend
from infctl.cutover.gates import GroupStats
from infctl.cutover.httproute import HTTPRouteBackend
from infctl.cutover.sources import GateSource, PrometheusGateSource, RouterMetricsSource
from infctl.errors import ConfigError
from infctl.kube import KubeClient
from infctl.telemetry.scrape import make_client

SourceFactory = Callable[[Sequence[str]], GateSource]
"""Group labels (old, new) -> the gate source that measures them."""


@dataclass(frozen=True)
class Target:
    router: str | None = None
    """Router base URL: its admin API holds the split; its /metrics feed the gates unless told otherwise."""
    httproute: str | None = None
    """HTTPRoute name (namespace from ``namespace``, else the kubeconfig context's)."""
    namespace: str | None = None
    prometheus: str | None = None
    """Prometheus base URL for the gates (sums every router replica)."""
    prometheus_selector: str = ""
    """Extra PromQL label matchers, e.g. ``namespace="inference"``."""
    metrics_url: str | None = None
    """A router whose /metrics feed the gates (default: ``router``)."""
    token: str | None = None
    """Router admin bearer token."""

    def check(self) -> None:
        if (self.router is None) == (self.httproute is None):
            raise ConfigError(
                "name the traffic object: --router URL or --httproute NAME (one of them)",
                hint="e.g. infctl cutover status --router http://127.0.0.1:8000",
            )

    @property
    def has_metrics(self) -> bool:
        return bool(self.prometheus or self.metrics_url or self.router)


class NoMetrics:
    """A walk without gates needs no metrics: every window is empty."""

    async def start(self) -> None:
        return None

    async def measure(self, window_s: float) -> dict[str, GroupStats]:
        return {}


@asynccontextmanager
async def open_target(
    target: Target,
    *,
    kube_connect: Callable[[], KubeClient] | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> AsyncIterator[tuple[TrafficBackend, SourceFactory]]:
    target.check()
    client = make_client(transport, timeout=httpx.Timeout(10.0, connect=3.0))
    kube: KubeClient | None = None
    try:
        backend: TrafficBackend
        if target.router is not None:
            backend = RouterBackend(client, target.router, target.token)
        else:
            assert target.httproute is not None and kube_connect is not None
            kube = kube_connect()
            backend = HTTPRouteBackend(kube, target.httproute, target.namespace or kube.namespace)

        def sources(groups: Sequence[str]) -> GateSource:
            if target.prometheus:
                return PrometheusGateSource(client, target.prometheus, groups, target.prometheus_selector)
            url = target.metrics_url or target.router
            return RouterMetricsSource(client, url, groups) if url else NoMetrics()

        yield backend, sources
    finally:
        await client.aclose()
        if kube is not None:
            kube.close()
