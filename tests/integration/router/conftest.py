"""Every live router test here runs on both fronts: aiohttp's server and the lean one (``--server lean``).

``start_router`` overrides the root one (tests/conftest.py, which has no ``server`` to pass on) with the same
defaults and calling convention plus the front of this test's ``server`` parameter."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from infctl.router.config import RouterConfig
from infctl.router.health import HealthPolicy
from infctl.router.server import serve as serve_router
from infctl.router.snapshot import Backend

StartRouter = Callable[..., Awaitable[str]]
ROUTER_DEFAULTS: dict[str, Any] = {
    "port": 0,
    "scrape_interval_s": 0.05,
    "health_interval_s": 0.1,
    "health": HealthPolicy(base_backoff_s=0.2, max_backoff_s=1.0),
    "drain_timeout_s": 1.0,
}


@pytest.fixture(params=["aiohttp", "lean"])
def server(request: pytest.FixtureRequest) -> str:
    """The front the router under test listens with."""
    return str(request.param)


@pytest.fixture
async def start_router(server: str) -> AsyncIterator[StartRouter]:
    """``url = await start_router([Backend(...), ...], policy=..., **RouterConfig fields)``; also
    ``kube_connect=``, ``upstream_client=`` and ``server=`` (default: this test's parameter) for ``serve``."""
    running: list[tuple[asyncio.Event, asyncio.Task[None]]] = []

    async def start(backends: list[Backend], **overrides: Any) -> str:
        names = ("kube_connect", "upstream_client", "server")
        kwargs = {k: overrides.pop(k) for k in names if k in overrides}
        kwargs.setdefault("server", server)
        cfg = RouterConfig(backends=tuple(backends), **{**ROUTER_DEFAULTS, **overrides})
        stop = asyncio.Event()
        urls: list[str] = []
        task = asyncio.create_task(serve_router(cfg, stop=stop, on_ready=urls.append, **kwargs))
        running.append((stop, task))
        while not urls:
            if task.done():
                task.result()
            await asyncio.sleep(0.001)
        return urls[0]

    yield start
    for stop, _ in running:
        stop.set()
    for _, task in running:
        await task
