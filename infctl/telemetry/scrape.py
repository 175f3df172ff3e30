"""Scraping engines' /metrics and load endpoints, through one client factory.

Engines are described structurally (:class:`MetricsSource`, :class:`LoadSource`), which every
``infctl.engines`` adapter satisfies, so telemetry does not import the engines package.
Failures become :class:`~infctl.errors.MetricsError` (metrics) or :class:`~infctl.errors.EngineError`
(load) carrying the URL, the status and a hint; :func:`scrape_many` returns them as values so one
dead engine does not hide the others.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Protocol

import httpx

from infctl.errors import EngineError, MetricsError
from infctl.telemetry.prometheus import MetricFamilies, parse_metrics
from infctl.telemetry.signals import EngineSignals, LoadReport

DEFAULT_TIMEOUT = httpx.Timeout(2.0, connect=1.0)
"""A scrape slower than this is worse than a missed one: the router treats stale data as saturated."""


class MetricsSource(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def metrics_path(self) -> str: ...
    @property
    def metrics_hint(self) -> str: ...
    @property
    def wanted_metrics(self) -> frozenset[str]: ...
    def signals(self, families: MetricFamilies) -> EngineSignals: ...


class LoadSource(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def load_paths(self) -> tuple[str, ...]: ...
    def parse_load(self, body: object) -> LoadReport: ...


def make_client(
    transport: httpx.AsyncBaseTransport | None = None,
    *,
    timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
    max_connections: int = 256,
) -> httpx.AsyncClient:
    """The one place telemetry clients are built; tests pass an ``httpx.MockTransport``."""
    return httpx.AsyncClient(
        transport=transport,
        timeout=timeout,
        limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections),
        headers={"accept": "text/plain"},
        # Engines are cluster-internal; an operator's HTTP(S)_PROXY must not sit between them and us.
        trust_env=False,
    )


async def scrape(client: httpx.AsyncClient, base_url: str, adapter: MetricsSource) -> EngineSignals:
    """GET ``<base_url>/metrics`` and turn it into signals; MetricsError on any failure."""
    url = base_url.rstrip("/") + adapter.metrics_path
    text = await _get_text(client, url, adapter.metrics_hint)
    try:
        families = parse_metrics(text, adapter.wanted_metrics)
    except MetricsError as e:
        raise MetricsError(f"GET {url}: {e.message}", hint=e.hint) from None
    return adapter.signals(families)


async def scrape_many(
    client: httpx.AsyncClient, targets: Mapping[str, MetricsSource], *, concurrency: int = 64
) -> dict[str, EngineSignals | MetricsError]:
    """Scrape every ``base_url -> adapter`` at once (at most ``concurrency`` in flight).

    Results keep ``targets``' order; a failed engine maps to its MetricsError instead of raising.
    """
    gate = asyncio.Semaphore(concurrency)

    async def one(url: str, adapter: MetricsSource) -> EngineSignals | MetricsError:
        async with gate:
            try:
                return await scrape(client, url, adapter)
            except MetricsError as e:
                return e

    results = await asyncio.gather(*(one(url, a) for url, a in targets.items()))
    return dict(zip(targets, results, strict=True))


async def fetch_load(client: httpx.AsyncClient, base_url: str, adapter: LoadSource) -> LoadReport:
    """The engine's load endpoint, trying ``adapter.load_paths`` in order past 404s; EngineError else."""
    base = base_url.rstrip("/")
    if not adapter.load_paths:
        raise EngineError(f"{adapter.name} has no load endpoint", hint="read /metrics instead (scrape)")
    last: httpx.Response | None = None
    for path in adapter.load_paths:
        url = base + path
        try:
            last = await client.get(url)
        except httpx.HTTPError as e:
            raise EngineError(f"GET {url}: {_describe(e)}", hint=_UNREACHABLE_HINT) from None
        if last.status_code == 404:
            continue
        if last.status_code != 200:
            raise EngineError(f"GET {url} answered HTTP {last.status_code}: {_snippet(last)}")
        try:
            body = json.loads(last.content)
        except ValueError:
            raise EngineError(f"GET {url} answered non-JSON: {_snippet(last)}") from None
        return adapter.parse_load(body)
    paths = " or ".join(adapter.load_paths)
    raise EngineError(
        f"{base}: no load endpoint ({paths} answered 404)",
        hint="vLLM serves /load only with --enable-server-load-tracking",
    )


_UNREACHABLE_HINT = "check that the engine is running and the URL's host and port are right"


async def _get_text(client: httpx.AsyncClient, url: str, hint: str) -> str:
    try:
        resp = await client.get(url)
    except httpx.HTTPError as e:
        raise MetricsError(f"GET {url}: {_describe(e)}", hint=_UNREACHABLE_HINT) from None
    if resp.status_code != 200:
        raise MetricsError(f"GET {url} answered HTTP {resp.status_code}: {_snippet(resp)}", hint=hint)
    # /metrics is UTF-8 by the exposition spec, whatever the charset header says.
    return resp.content.decode("utf-8", errors="replace")


def _describe(e: httpx.HTTPError) -> str:
    if isinstance(e, httpx.TimeoutException):
        return f"timed out ({type(e).__name__})"
    detail = str(e) or type(e).__name__
    return f"{type(e).__name__}: {detail}" if detail != type(e).__name__ else detail


def _snippet(resp: httpx.Response) -> str:
    text = resp.content[:200].decode("utf-8", errors="replace").strip()
    return repr(text) if text else "(empty body)"
