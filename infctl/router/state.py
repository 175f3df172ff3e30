"""What one router process owns (:class:`RouterState`), in a module of its own: every handler module (app,
admin, proxy, attempt, legs, migrate, background, discovery, the fronts) reads it, and ``server`` builds it,
so it imports none of them and they need not import ``server`` (no import circle inside ``router/``)."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field, replace
from typing import Any, cast

import aiohttp

from infctl.engines import EngineAdapter, get_adapter
from infctl.errors import MetricsError
from infctl.router.admission import AdmissionQueue, Scope, empty, headroom, saturated
from infctl.router.config import RouterConfig
from infctl.router.core import RouterCore
from infctl.router.estimating import Estimating
from infctl.router.fetch import EngineGet
from infctl.router.http1 import Http1Pool
from infctl.router.kv_events import KVSource, KVStats, subscribe
from infctl.router.metrics import RouterMetrics
from infctl.router.policies import PDSettings
from infctl.router.pool import BackendPool
from infctl.router.ranks import Target, scrape_targets
from infctl.tokenization import EstimateTokenizer, Tokenizer


@dataclass
class RouterState:
    """Everything one router process owns. Handlers reach it through the app, never through globals."""

    cfg: RouterConfig
    core: RouterCore
    pool: BackendPool
    session: aiohttp.ClientSession
    scraper: EngineGet
    """GETs of the engines' own endpoints: scrapes, health probes, /v1/models."""
    metrics: RouterMetrics = field(default_factory=RouterMetrics)
    policy_name: str = ""
    pd_settings: PDSettings = field(default_factory=PDSettings)
    background: set[asyncio.Task[Any]] = field(default_factory=set)
    draining: bool = False
    handing_over: bool = False
    """A successor listens on the same port (SIGUSR1): this router has stopped listening and serves what
    arrives on its open connections, closing each after its answer (``serve``)."""
    kv_stats: KVStats = field(default_factory=KVStats)
    upstream_version: int = 0
    """Bumped on every write of the upstream weights (the If-Match / ETag of /admin/upstreams)."""
    upstream_annotations: dict[str, str] = field(default_factory=dict)
    """Opaque state a cutover keeps beside the weights (history, plan), so a second operator sees it."""
    admission: AdmissionQueue = field(init=False)
    kv_sources: list[KVSource] = field(default_factory=list)
    """Engines' KV-event publishers being followed, one per endpoint (from the config, the admin API or
    discovery); each one's ``backends`` is the router's own copy, changed by follow and unfollow."""
    kv_stops: dict[str, asyncio.Event] = field(default_factory=dict)
    """Endpoint -> what stops its subscription."""
    http1: Http1Pool | None = None
    """The lean upstream client for generation requests; None sends them through ``session`` (aiohttp)."""
    inflight: int = 0
    """Generation requests being served (either front); the drain waits for it to reach 0."""
    idle: asyncio.Event = field(default_factory=asyncio.Event)
    """Set each time ``inflight`` drops to 0."""
    tokenizer: Tokenizer = field(default_factory=EstimateTokenizer)
    """Counts and hashes prompts (``cfg.tokenizer``)."""
    estimating: Estimating = field(init=False)
    """When the router may route on the estimate rather than wait for ``tokenizer``."""

    def __post_init__(self) -> None:
        self.estimating = Estimating(self.tokenizer, self.metrics)
        self.admission = AdmissionQueue(
            self.cfg.admission_queue,
            self.cfg.admission_deadline_s,
            self.is_saturated,
            scope_saturated=self.scope_saturated,
            room=self.room,
            is_empty=self.scope_empty if self.cfg.hold_when_empty_s > 0 else None,
        )

    def scrape_soon(self, backend_id: str) -> None:
        """Scrape one backend now rather than at the next round: a backend without signals counts as stale,
        and the policies pass over stale backends while fresh ones exist, so a newcomer would sit idle."""

        async def once() -> None:
            with contextlib.suppress(KeyError):
                result = (await scrape_targets(self.scraper, [self.target(backend_id)]))[backend_id]
                if not isinstance(result, MetricsError):
                    self.pool.record_signals(backend_id, result, asyncio.get_running_loop().time())

        task = asyncio.create_task(once())
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    def follow_kv_events(self, source: KVSource) -> None:
        """Subscribe to an engine's KV events, once per endpoint whoever asks (the config, the admin API,
        discovery): a followed endpoint takes the new rank -> backend entries, which its running
        subscription reads batch by batch."""
        for known in self.kv_sources:
            if known.endpoint == source.endpoint:
                _credits(known).update(source.backends)
                return
        source = replace(source, backends=dict(source.backends))
        self.kv_sources.append(source)
        self.kv_stops[source.endpoint] = stop = asyncio.Event()
        task = asyncio.create_task(subscribe(self.core, source, stop, self.kv_stats))
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    def unfollow_kv_events(self, backend_id: str) -> None:
        """``backend_id`` left (or moved): no endpoint's events are credited to it any more, and an
        endpoint left crediting nobody is no longer followed (its subscription stops)."""
        for source in list(self.kv_sources):
            credits = _credits(source)
            ranks = [r for r, b in credits.items() if b == backend_id]
            for rank in ranks:
                del credits[rank]
            if ranks and not credits:
                self.kv_sources.remove(source)
                self.kv_stops.pop(source.endpoint).set()

    def unfollow_all_kv_events(self) -> None:
        """Stop every subscription (the router is shutting down)."""
        self.kv_sources.clear()
        for stop in self.kv_stops.values():
            stop.set()
        self.kv_stops.clear()

    def is_saturated(self) -> bool:
        return saturated(self.pool.snapshot(asyncio.get_running_loop().time()), self.core.policy.settings)

    def scope_saturated(self, scope: Scope) -> bool:
        """Whether the backends of ``scope`` (a length bucket's pools and spill) are all saturated."""
        now = asyncio.get_running_loop().time()
        return saturated(self.pool.snapshot(now), self.core.policy.settings, scope)

    def room(self, scope: Scope | None) -> int:
        """How many waiters one wake may release into ``scope``: what the last scrape shows room for."""
        now = asyncio.get_running_loop().time()
        return headroom(self.pool.snapshot(now), self.core.policy.settings, scope)

    def scope_empty(self, scope: Scope | None) -> bool:
        """Whether ``scope`` has no routable backend at all (its pool is scaled to zero; see ``empty``)."""
        return empty(self.pool.snapshot(asyncio.get_running_loop().time()), scope)

    @property
    def disaggregated(self) -> bool:
        return self.pool.has_prefill

    def adapter(self, backend_id: str) -> EngineAdapter:
        return get_adapter(self.pool.backend(backend_id).engine or self.cfg.engine)

    def target(self, backend_id: str) -> Target:
        b = self.pool.backend(backend_id)
        return Target(backend_id, b.url, b.dp_rank, self.adapter(backend_id))


def _credits(source: KVSource) -> dict[int | None, str]:
    """A followed source's rank -> backend entries, which ``follow_kv_events`` made the router's own dict."""
    return cast(dict[int | None, str], source.backends)
