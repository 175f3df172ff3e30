"""Scraping engines' /metrics and load endpoints, through one client factory.

Engines are described structurally (:class:`MetricsSource`, :class:`LoadSource`), which every
``infctl.engines`` adapter satisfies, so telemetry does not import the engines package.
Failures become :class:`~infctl.errors.MetricsError` (metrics) or :class:`~infctl.errors.EngineError`
(load) carrying the URL, the status and a hint; :func:`scrape_many` returns them as values so one
dead engine does not hide the others.

:func:`scrape` and :func:`scrape_many` read through an httpx client (:func:`make_client`) or through any
:class:`Getter`: a bare ``GET`` that answers ``(status, body)`` or raises :class:`NoAnswer`. The router
scrapes every engine ten times a second through its own lean HTTP/1.1 client that way
(``infctl.router.fetch.EngineGet``), at half the CPU of httpx's client machinery per scrape.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeAlias

from infctl.errors import EngineError, MetricsError
from infctl.telemetry.prometheus import MetricFamilies, parse_metrics
from infctl.telemetry.signals import EngineSignals, LoadReport

if TYPE_CHECKING:
    # httpx is imported where a client is built or used, not here: a router scraping plain-HTTP engines
    # through its lean client never needs it (~50 ms of every start-up, with the click and rich it pulls).
    import httpx

DEFAULT_TIMEOUT_S = 2.0
"""Longest wait for a scrape's answer, seconds: a scrape slower than this is worse than a missed one (the
router treats stale data as saturated)."""
DEFAULT_CONNECT_TIMEOUT_S = 1.0
"""Longest wait for a scrape's connection, seconds."""


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


class NoAnswer(Exception):
    """A :class:`Getter`'s GET produced no HTTP answer (refused, reset, not HTTP, or timed out); the
    message says which, as the end of a one-line error."""

    def __init__(self, message: str, *, timed_out: bool) -> None:
        super().__init__(message)
        self.timed_out = timed_out
        """The engine said nothing in time (a health probe counts that as slow, not dead)."""


class Getter(Protocol):
    """A bare ``GET url`` answering ``(status, body)``: what a scrape needs of a client, and no more."""

    async def __call__(self, url: str, timeout_s: float | None = None) -> tuple[int, bytes]:
        """``timeout_s``: longest silence from the engine, seconds (None: the getter's own default).
        Raises NoAnswer when there is no answer."""
        ...


@dataclass(frozen=True, slots=True)
class HttpxGet:
    """An httpx client as a :class:`Getter` (its own timeouts unless a call gives one)."""

    client: httpx.AsyncClient

    async def __call__(self, url: str, timeout_s: float | None = None) -> tuple[int, bytes]:
        import httpx

        try:
            if timeout_s is None:
                resp = await self.client.get(url)
            else:
                resp = await self.client.get(url, timeout=timeout_s)
        except httpx.HTTPError as e:
            raise NoAnswer(_describe(e), timed_out=isinstance(e, httpx.TimeoutException)) from None
        return resp.status_code, resp.content


Client: TypeAlias = "httpx.AsyncClient | Getter"
"""What :func:`scrape` and :func:`scrape_many` read with."""


def make_client(
    transport: httpx.AsyncBaseTransport | None = None,
    *,
    timeout: float | httpx.Timeout | None = None,
    max_connections: int = 256,
) -> httpx.AsyncClient:
    """The one place telemetry clients are built; tests pass an ``httpx.MockTransport``. ``timeout`` None:
    ``DEFAULT_TIMEOUT_S``, connecting within ``DEFAULT_CONNECT_TIMEOUT_S``."""
    import httpx

    if timeout is None:
        timeout = httpx.Timeout(DEFAULT_TIMEOUT_S, connect=DEFAULT_CONNECT_TIMEOUT_S)
    return httpx.AsyncClient(
        transport=transport,
        timeout=timeout,
        limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections),
        headers={"accept": "text/plain"},
        # Engines are cluster-internal; an operator's HTTP(S)_PROXY must not sit between them and us.
        trust_env=False,
    )


async def scrape(client: Client, base_url: str, adapter: MetricsSource) -> EngineSignals:
    """GET ``<base_url>/metrics`` and turn it into signals; MetricsError on any failure."""
    url = base_url.rstrip("/") + adapter.metrics_path
    get = client if callable(client) else HttpxGet(client)  # a Getter is called; a client is not
    text = await _get_text(get, url, adapter.metrics_hint)
    try:
        families = parse_metrics(text, adapter.wanted_metrics)
    except MetricsError as e:
        raise MetricsError(f"GET {url}: {e.message}", hint=e.hint) from None
    return adapter.signals(families)


async def scrape_many(
    client: Client, targets: Mapping[str, MetricsSource], *, concurrency: int = 64
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
    import httpx

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
            raise EngineError(f"GET {url} answered HTTP {last.status_code}: {_snippet(last.content)}")
        try:
            body = json.loads(last.content)
        except ValueError:
            raise EngineError(f"GET {url} answered non-JSON: {_snippet(last.content)}") from None
        return adapter.parse_load(body)
    paths = " or ".join(adapter.load_paths)
    raise EngineError(
        f"{base}: no load endpoint ({paths} answered 404)",
        hint="vLLM serves /load only with --enable-server-load-tracking",
    )


_UNREACHABLE_HINT = "check that the engine is running and the URL's host and port are right"


async def _get_text(get: Getter, url: str, hint: str) -> str:
    try:
        status, body = await get(url)
    except NoAnswer as e:
        raise MetricsError(f"GET {url}: {e}", hint=_UNREACHABLE_HINT) from None
    if status != 200:
        raise MetricsError(f"GET {url} answered HTTP {status}: {_snippet(body)}", hint=hint)
    # /metrics is UTF-8 by the exposition spec, whatever the charset header says.
    return body.decode("utf-8", errors="replace")


def _describe(e: httpx.HTTPError) -> str:
    import httpx

    if isinstance(e, httpx.TimeoutException):
        return f"timed out ({type(e).__name__})"
    detail = str(e) or type(e).__name__
    return f"{type(e).__name__}: {detail}" if detail != type(e).__name__ else detail


def _snippet(body: bytes) -> str:
    text = body[:200].decode("utf-8", errors="replace").strip()
    return repr(text) if text else "(empty body)"
