"""The router's background rounds: engine signals scraped every ``scrape_interval_s``, health probed every
``health_interval_s`` (eject on failure, re-admit after backoff; a pinned PD prefill's engine's rank count
read, :mod:`infctl.router.engine_ranks`). Both only feed the backend pool; the request path reads what they
leave there through the pool's snapshot."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from infctl.errors import MetricsError
from infctl.router.engine_ranks import read_engine_ranks, to_read
from infctl.router.ranks import scrape_targets
from infctl.telemetry.scrape import NoAnswer

if TYPE_CHECKING:
    from infctl.router.state import RouterState

log = logging.getLogger(__name__)


async def scrape_loop(state: RouterState, stop: asyncio.Event) -> None:
    """Refresh every backend's engine signals each ``scrape_interval_s`` (one scrape per engine URL; each
    rank of a data-parallel engine gets its own rank's signals)."""
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        started = loop.time()
        results = await scrape_targets(state.scraper, [state.target(b) for b in state.pool.ids()])
        now = loop.time()
        for bid, result in results.items():
            # A failed scrape lets the signals go stale (stale counts as saturated); ejecting is the prober's.
            if not isinstance(result, MetricsError):
                state.pool.record_signals(bid, result, now)
        state.admission.wake()
        await sleep_until(stop, started + state.cfg.scrape_interval_s - loop.time())


async def probe_loop(state: RouterState, stop: asyncio.Event) -> None:
    """Probe every backend's health path; eject on failure, re-admit after backoff on success."""
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        started = loop.time()
        ids = state.pool.ids()
        results = await asyncio.gather(*(_probe(state, b) for b in ids))
        now = loop.time()
        readmitted = set()
        for bid, (error, fatal) in zip(ids, results, strict=True):
            if bid not in state.pool:
                continue
            if error is None:
                if state.pool.record_probe_ok(bid, now):
                    state.metrics.readmissions[bid] += 1
                    readmitted.add(bid)
                    log.warning("re-admitted %s", bid)
            elif state.pool.record_failure(bid, now, fatal=fatal, error=error):
                state.metrics.ejections[bid] += 1
                log.warning("ejected %s: %s", bid, error)
        answered = [bid for bid, (error, _) in zip(ids, results, strict=True) if error is None]
        await read_engine_ranks(state, to_read(state, answered, readmitted))
        state.metrics.probe_rounds += 1
        await sleep_until(stop, started + state.cfg.health_interval_s - loop.time())


async def _probe(state: RouterState, backend_id: str) -> tuple[str | None, bool]:
    """(error or None, fatal). Refused connections and dead verdicts are fatal; a slow probe only counts."""
    backend = state.pool.backend(backend_id)
    spec = state.adapter(backend_id).health
    try:
        status, _ = await state.scraper(backend.url + spec.path, state.cfg.probe_timeout_s)
    except NoAnswer as exc:
        if exc.timed_out:
            return f"health probe {exc}", False
        return f"health probe failed: {exc}", True
    verdict = spec.state(status)
    if verdict == "ready":
        return None, False
    return f"health probe: HTTP {status} ({verdict})", verdict != "starting"


async def sleep_until(stop: asyncio.Event, delay: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=max(0.0, delay))
