"""The router's background rounds over real local engines: the prober ejects a refused engine at once and
counts a slow one as a failure (not fatal); the scraper feeds each engine's signals to the pool; both through
the router's bare GET (``EngineGet`` over its lean pool)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable

import pytest
from aiohttp import web

from infctl.router.background import probe_loop, scrape_loop
from infctl.router.config import RouterConfig
from infctl.router.server import RouterState, build_state
from infctl.router.snapshot import Backend

METRICS = 'vllm:num_requests_waiting{model_name="m"} 4.0\nvllm:num_requests_running{model_name="m"} 2.0\n'


@pytest.fixture
async def engine() -> AsyncIterator[str]:
    """An engine whose /health answers 200 and whose /slow/health never answers in time."""

    async def health(_: web.Request) -> web.Response:
        return web.Response()

    async def stall(_: web.Request) -> web.Response:
        await asyncio.sleep(5)
        return web.Response()

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(text=METRICS)

    app = web.Application()
    app.router.add_get("/health", health)
    app.router.add_get("/slow/health", stall)
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app, handler_cancellation=True)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def until(condition: Callable[[], bool], deadline_s: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline_s
    while not condition():
        assert loop.time() < end, "the background round never got there"
        await asyncio.sleep(0.01)


async def closed(state: RouterState) -> None:
    if state.http1 is not None:
        state.http1.close()
    await state.session.close()


async def test_the_prober_ejects_a_refused_engine_and_counts_a_slow_one(engine: str) -> None:
    backends = (
        Backend(id="ok", url=engine),
        Backend(id="slow", url=engine + "/slow"),
        Backend(id="gone", url=f"http://127.0.0.1:{closed_port()}"),
    )
    cfg = RouterConfig(backends=backends, health_interval_s=0.05, probe_timeout_s=0.1)
    state = build_state(cfg)
    assert state.scraper.pool is state.http1  # probes ride the lean pool, not httpx
    stop = asyncio.Event()
    task = asyncio.create_task(probe_loop(state, stop))
    try:
        await until(lambda: state.metrics.probe_rounds >= 1)
    finally:
        stop.set()
        await task
        await closed(state)
    gone, slow, ok = (state.pool.health_of(b) for b in ("gone", "slow", "ok"))
    assert gone.ejected and gone.last_error is not None and "failed" in gone.last_error
    assert not slow.ejected and slow.consecutive_failures >= 1  # slow is not dead: it takes a streak
    assert slow.last_error is not None and "timed out" in slow.last_error
    assert not ok.ejected and ok.last_error is None


async def test_the_scraper_feeds_the_pool_and_a_dead_engine_goes_stale(engine: str) -> None:
    backends = (Backend(id="ok", url=engine), Backend(id="gone", url=f"http://127.0.0.1:{closed_port()}"))
    state = build_state(RouterConfig(backends=backends, scrape_interval_s=0.02))
    stop = asyncio.Event()
    task = asyncio.create_task(scrape_loop(state, stop))
    loop = asyncio.get_running_loop()
    try:
        await until(lambda: state.pool.snapshot(loop.time()).states["ok"].signals is not None)
    finally:
        stop.set()
        await task
        await closed(state)
    states = state.pool.snapshot(loop.time()).states
    ok = states["ok"].signals
    assert ok is not None and (ok.queue, ok.running) == (4.0, 2.0)
    assert states["gone"].signals is None  # never scraped: stale, which counts as saturated
