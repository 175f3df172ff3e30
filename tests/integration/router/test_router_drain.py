"""Draining on SIGTERM (stop): the router keeps accepting so that /ready and new generation requests can
answer 503 (load balancers move away) while in-flight streams finish; it exits by ``drain_timeout_s``."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from infctl.router.config import RouterConfig
from infctl.router.health import HealthPolicy
from infctl.router.server import serve
from infctl.router.snapshot import Backend

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
GUARD_S = 60.0
"""How long the router may take to exit once stopped: a guard, far below the long stream's own length (~2
min) and far above ``drain_timeout_s``, so exiting within it shows the drain cut the stream, whatever a
loaded machine adds."""


async def _router(url: str, server: str, drain_s: float) -> tuple[str, asyncio.Event, asyncio.Task[None]]:
    cfg = RouterConfig(
        backends=(Backend(id=url, url=url),),
        port=0,
        policy="round_robin",
        scrape_interval_s=0.05,
        health_interval_s=0.1,
        health=HealthPolicy(base_backoff_s=0.2, max_backoff_s=1.0),
        drain_timeout_s=drain_s,
    )
    stop, urls = asyncio.Event(), list[str]()
    task = asyncio.create_task(serve(cfg, stop=stop, on_ready=urls.append, server=server))  # type: ignore[arg-type]
    while not urls:
        if task.done():
            task.result()
        await asyncio.sleep(0.005)
    async with httpx.AsyncClient() as c, asyncio.timeout(60):  # until ready (late on a loaded machine)
        while (await c.get(f"{urls[0]}/ready")).status_code != 200:
            await asyncio.sleep(0.02)
    return urls[0], stop, task


async def test_draining_answers_503_on_new_connections_while_a_stream_finishes(
    start_sim: Callable[..., Awaitable[Any]], server: str
) -> None:
    # Real time: 300 tokens (~1.7 s at the profile's ~5.8 ms a token) outlast what the test asks meanwhile
    # (40 tokens, ~0.23 s, left a loaded machine a fifth of a second for the new client's two requests).
    sim = await start_sim(time_scale=1.0)
    url, stop, task = await _router(sim.urls[0], server, drain_s=120.0)
    body = {"model": MODEL, "prompt": "a b c", "max_tokens": 300, "stream": True, "ignore_eos": True}
    async with httpx.AsyncClient(timeout=30) as c, c.stream("POST", f"{url}/v1/completions", json=body) as r:
        lines = r.aiter_lines()
        first = await anext(lines)
        stop.set()
        await asyncio.sleep(0.05)
        async with httpx.AsyncClient(timeout=10) as other:  # a new connection: still accepted
            ready = await other.get(f"{url}/ready")
            late = await other.post(f"{url}/v1/completions", json={**body, "stream": False})
        assert not task.done()  # the stream holds the drain open
        rest = [line async for line in lines]
    assert ready.status_code == 503 and ready.json()["ready"] is False
    assert late.status_code == 503 and late.json()["error"]["type"] == "ServiceUnavailableError"
    tokens = [x for x in [first, *rest] if x.startswith("data: {")]
    assert len(tokens) >= 300 and [x for x in rest if x][-1] == "data: [DONE]"
    await asyncio.wait_for(task, 60)  # nothing in flight any more: no wait for the 120 s timeout


async def test_a_stream_longer_than_the_drain_timeout_is_cut_and_the_router_exits_by_the_timeout(
    start_sim: Callable[..., Awaitable[Any]], server: str
) -> None:
    """The stream (2,000 tokens at a tenth of real time, ~2 min: far longer than the drain) keeps flowing
    during the drain, then is cut, and the router exits by its drain timeout, not the stream's end (no
    upper bound on the clock: it exits within ``GUARD_S``, and lines still came half the timeout in)."""
    drain_s = 1.0
    sim = await start_sim(time_scale=10.0)
    url, stop, task = await _router(sim.urls[0], server, drain_s=drain_s)
    body = {"model": MODEL, "prompt": "a b c", "max_tokens": 2000, "stream": True, "ignore_eos": True}
    loop = asyncio.get_running_loop()
    after_stop: list[float] = []
    seen: list[str] = []
    async with httpx.AsyncClient(timeout=30) as c, c.stream("POST", f"{url}/v1/completions", json=body) as r:
        lines = r.aiter_lines()
        seen.append(await anext(lines))
        stopped = loop.time()
        stop.set()
        with contextlib.suppress(httpx.HTTPError):  # a cut chunked stream
            async for line in lines:
                seen.append(line)
                after_stop.append(loop.time() - stopped)
        await asyncio.wait_for(task, GUARD_S)  # the router exited long before the stream would have ended
    assert "data: [DONE]" not in seen
    assert after_stop and max(after_stop) >= drain_s / 2  # still served well into the drain, not cut at once
