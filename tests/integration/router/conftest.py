"""A live router in the test's event loop, in front of simulated engines started by ``start_sim``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from infctl.router.config import RouterConfig
from infctl.router.health import HealthPolicy
from infctl.router.server import serve
from infctl.router.snapshot import Backend

StartRouter = Callable[..., Awaitable[str]]


@pytest.fixture
async def start_router() -> AsyncIterator[StartRouter]:
    """``url = await start_router([Backend(...), ...], policy="cache_aware", **RouterConfig fields)``."""
    running: list[tuple[asyncio.Event, asyncio.Task[None]]] = []

    async def start(backends: list[Backend], **overrides: Any) -> str:
        fields: dict[str, Any] = {
            "port": 0,
            "scrape_interval_s": 0.05,
            "health_interval_s": 0.1,
            "health": HealthPolicy(base_backoff_s=0.2, max_backoff_s=1.0),
            "drain_timeout_s": 1.0,
        }
        kube_connect = overrides.pop("kube_connect", None)
        cfg = RouterConfig(backends=tuple(backends), **{**fields, **overrides})
        stop = asyncio.Event()
        urls: list[str] = []
        task = asyncio.create_task(serve(cfg, stop=stop, on_ready=urls.append, kube_connect=kube_connect))
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
