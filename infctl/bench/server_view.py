"""The server-side view of a run: engines scraped before and after (and sampled during) through the
engine adapters: prefix-cache hit rate, preemptions, token counts, queue and KV-usage peaks."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field

import httpx

from infctl.engines import ENGINES, EngineAdapter, get_adapter
from infctl.errors import MetricsError
from infctl.telemetry import EngineSignals, make_client, scrape, scrape_many


@dataclass(frozen=True)
class EngineView:
    """One engine over the run. Counters are differences between the scrapes before and after."""

    url: str
    engine: str
    prefix_queries: float = 0.0
    """Prompt tokens looked up in the prefix cache during the run."""
    prefix_hits: float = 0.0
    preemptions: float = 0.0
    prompt_tokens: float = 0.0
    generation_tokens: float = 0.0
    queue_peak: float = 0.0
    """Most requests waiting at any sample (or scrape)."""
    running_peak: float = 0.0
    kv_usage_peak: float = 0.0
    error: str | None = None
    """Why the after-run scrape failed, if it did (the counters are then zero)."""

    @property
    def hit_rate(self) -> float | None:
        return self.prefix_hits / self.prefix_queries if self.prefix_queries else None


@dataclass(frozen=True)
class ServerView:
    engines: list[EngineView] = field(default_factory=list)
    samples: int = 0
    """Queue samples taken during the run."""

    @property
    def hit_rate(self) -> float | None:
        queries = sum(e.prefix_queries for e in self.engines)
        return sum(e.prefix_hits for e in self.engines) / queries if queries else None

    @property
    def preemptions(self) -> float:
        return sum(e.preemptions for e in self.engines)

    @property
    def queue_peak(self) -> float:
        return max((e.queue_peak for e in self.engines), default=0.0)


async def detect_adapters(
    client: httpx.AsyncClient, urls: list[str], engine: str | None
) -> dict[str, EngineAdapter]:
    """``url -> adapter``: the named engine's, or the one whose metric names each engine's /metrics shows."""
    if engine is not None:
        adapter = get_adapter(engine)
        return dict.fromkeys(urls, adapter)
    found: dict[str, EngineAdapter] = {}
    for url in urls:
        failure: MetricsError | None = None
        for adapter in ENGINES.values():
            try:
                signals = await scrape(client, url, adapter)
            except MetricsError as e:
                failure = failure or e
                continue
            if signals.model_names or signals.cache_capacity_tokens is not None:
                found[url] = adapter
                break
        else:
            if failure is not None:
                raise failure
            raise MetricsError(
                f"{url}/metrics: no engine's metric names found",
                hint=f"name the engine with --engine ({', '.join(sorted(ENGINES))})",
            )
    return found


class ServerWatcher:
    """Scrape before, sample queues during, scrape after."""

    def __init__(
        self,
        targets: Mapping[str, EngineAdapter],
        *,
        interval_s: float = 0.5,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.targets = dict(targets)
        self.interval_s = interval_s
        self.client = make_client(transport)
        self.before: dict[str, EngineSignals] = {}
        self.peaks: dict[str, list[float]] = {u: [0.0, 0.0, 0.0] for u in self.targets}
        self.samples = 0
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Scrape every engine once (a failure raises MetricsError, before any load) and start sampling."""
        results = await scrape_many(self.client, self.targets)
        for url, res in results.items():
            if isinstance(res, MetricsError):
                await self.client.aclose()
                raise res
            self.before[url] = res
            self._note(url, res)
        self._task = asyncio.create_task(self._sample())

    async def finish(self) -> ServerView:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        try:
            after = await scrape_many(self.client, self.targets)
        finally:
            await self.client.aclose()
        views = []
        for url, adapter in self.targets.items():
            res = after[url]
            if isinstance(res, MetricsError):
                views.append(EngineView(url, adapter.name, error=res.message))
                continue
            self._note(url, res)
            views.append(_diff(url, adapter.name, self.before[url], res, self.peaks[url]))
        return ServerView(views, self.samples)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        await self.client.aclose()

    async def _sample(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            results = await scrape_many(self.client, self.targets)
            self.samples += 1
            for url, res in results.items():
                if not isinstance(res, MetricsError):
                    self._note(url, res)

    def _note(self, url: str, s: EngineSignals) -> None:
        peak = self.peaks[url]
        peak[0] = max(peak[0], s.queue)
        peak[1] = max(peak[1], s.running)
        peak[2] = max(peak[2], s.kv_usage)


def _diff(url: str, engine: str, a: EngineSignals, b: EngineSignals, peaks: list[float]) -> EngineView:
    return EngineView(
        url=url,
        engine=engine,
        prefix_queries=max(0.0, b.prefix_queries - a.prefix_queries),
        prefix_hits=max(0.0, b.prefix_hits - a.prefix_hits),
        preemptions=max(0.0, b.preemptions - a.preemptions),
        prompt_tokens=max(0.0, b.prompt_tokens - a.prompt_tokens),
        generation_tokens=max(0.0, b.generation_tokens - a.generation_tokens),
        queue_peak=peaks[0],
        running_peak=peaks[1],
        kv_usage_peak=peaks[2],
    )
