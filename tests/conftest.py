"""Shared fixtures: simulated engines on free 127.0.0.1 ports, served by ``infctl.sim.server.serve``
in the test's event loop."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from infctl.errors import EngineError
from infctl.router.config import RouterConfig
from infctl.router.health import HealthPolicy
from infctl.router.server import serve as serve_router
from infctl.router.snapshot import Backend
from infctl.sim.server import SimCluster, serve
from infctl.sim.settings import SimSettings

SIM_DEFAULTS: dict[str, Any] = {"host": "127.0.0.1", "port": 0, "time_scale": 0.01}
"""Free ports and a hundred times faster than real time, unless a test says otherwise."""

StartSim = Callable[..., Awaitable[SimCluster]]


@pytest.fixture
async def start_sim() -> AsyncIterator[StartSim]:
    """``cluster = await start_sim(personality="sglang", instances=2, ...)``: any ``SimSettings`` field.

    Returns the running :class:`SimCluster` (``cluster.urls``, ``cluster.instances[i].kv_endpoint``);
    every cluster started is stopped when the test ends.
    """
    running: list[tuple[asyncio.Event, asyncio.Task[None]]] = []

    async def start(**overrides: Any) -> SimCluster:
        cfg = SimSettings(**{**SIM_DEFAULTS, **overrides})
        stop = asyncio.Event()
        started: list[SimCluster] = []
        task = asyncio.create_task(serve(cfg, stop=stop, on_ready=started.append))
        while not started:
            if task.done():
                task.result()  # raises what serve raised
            await asyncio.sleep(0.001)
        running.append((stop, task))
        return started[0]

    yield start
    for stop, _ in running:
        stop.set()
    for _, task in running:
        # A cluster whose every instance crashed (fault tests) ends serve with EngineError.
        with contextlib.suppress(EngineError):
            await task


@pytest.fixture
async def sim_url(start_sim: StartSim) -> str:
    """Base URL of one default simulated vLLM engine (llama3-8b-h100, time scale 0.01)."""
    cluster = await start_sim()
    return cluster.urls[0]


def parse_exposition(text: str) -> dict[str, float]:
    """Prometheus text to ``{'name{labels}': value}`` (labels exactly as written; comments skipped)."""
    samples: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            samples[key] = float(value)
    return samples


@pytest.fixture
def scrape() -> Callable[[str], Awaitable[dict[str, float]]]:
    """``samples = await scrape(url)``: GET url/metrics, parsed by :func:`parse_exposition`."""
    import httpx

    async def get(url: str) -> dict[str, float]:
        async with httpx.AsyncClient() as client:
            resp = await client.get(f"{url}/metrics")
            resp.raise_for_status()
            return parse_exposition(resp.text)

    return get


StartRouter = Callable[..., Awaitable[str]]


@pytest.fixture
async def start_router() -> AsyncIterator[StartRouter]:
    """``url = await start_router([Backend(...), ...], policy="cache_aware", **RouterConfig fields)``; also
    ``kube_connect=``, ``upstream_client="lean"|"aiohttp"`` and ``server="aiohttp"|"lean"`` for ``serve``."""
    running: list[tuple[asyncio.Event, asyncio.Task[None]]] = []

    async def start(backends: list[Backend], **overrides: Any) -> str:
        fields: dict[str, Any] = {
            "port": 0,
            "scrape_interval_s": 0.05,
            "health_interval_s": 0.1,
            "health": HealthPolicy(base_backoff_s=0.2, max_backoff_s=1.0),
            "drain_timeout_s": 1.0,
            # The backends here are `infctl sim` engines, which count whitespace words by default.
            "tokenizer": "words",
        }
        names = ("kube_connect", "upstream_client", "server")
        kwargs = {k: overrides.pop(k) for k in names if k in overrides}
        cfg = RouterConfig(backends=tuple(backends), **{**fields, **overrides})
        stop = asyncio.Event()
        urls: list[str] = []
        serving = serve_router(cfg, stop=stop, on_ready=urls.append, **kwargs)
        task = asyncio.create_task(serving)
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
