"""A data-parallel engine behind one URL: each rank is its own target with its own load.

The engine here is a small real aiohttp server on 127.0.0.1 that labels its metrics per rank as vLLM does
(``engine="0"``, ``engine="1"``), reports exactly the load a test sets for each rank, and records the DP-rank
header of every completion it receives, PD legs included. The simulator serves data-parallel ranks too
(``infctl sim --data-parallel-size N``; the router runs against it in ``test_router_dp_sim.py``), but it
does not give ranks PD roles, and its loads come from real requests rather than from the test.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import httpx
import pytest
from aiohttp import web

from infctl.engines import get_adapter
from infctl.router.snapshot import Backend

MODEL = "m"
StartRouter = Callable[..., Awaitable[str]]


@dataclass
class FakeDPEngine:
    url: str = ""
    waiting: dict[str, int] = field(default_factory=lambda: {"0": 0, "1": 0})
    ranks_seen: list[str | None] = field(default_factory=list)

    def metrics(self) -> str:
        lines = []
        for rank, waiting in self.waiting.items():
            lines.append(f'vllm:num_requests_waiting{{model_name="{MODEL}",engine="{rank}"}} {waiting}')
            lines.append(f'vllm:num_requests_running{{model_name="{MODEL}",engine="{rank}"}} {waiting * 4}')
            lines.append(f'vllm:kv_cache_usage_perc{{model_name="{MODEL}",engine="{rank}"}} 0.1')
        return "\n".join(lines) + "\n"


@pytest.fixture
async def dp_engine() -> AsyncIterator[FakeDPEngine]:
    engine = FakeDPEngine()
    header = get_adapter("vllm").dp_rank_header
    assert header is not None

    async def complete(request: web.Request) -> web.Response:
        engine.ranks_seen.append(request.headers.get(header))
        choice = {"index": 0, "text": " ok", "finish_reason": "length"}
        return web.json_response({"choices": [choice], "kv_transfer_params": {"remote_engine_id": "e"}})

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(text=engine.metrics())

    async def health(_: web.Request) -> web.Response:
        return web.Response()

    app = web.Application()
    app.router.add_post("/v1/completions", complete)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/health", health)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    engine.url = f"http://{host}:{port}"
    try:
        yield engine
    finally:
        await runner.cleanup()


async def test_each_rank_gets_its_own_signals_and_requests_avoid_the_busy_rank(
    dp_engine: FakeDPEngine, start_router: StartRouter
) -> None:
    dp_engine.waiting = {"0": 40, "1": 0}  # rank 0 is swamped, rank 1 idle
    backends = [
        Backend(id=f"{dp_engine.url}#dp{r}", url=dp_engine.url, dp_rank=r, engine="vllm") for r in (0, 1)
    ]
    # Signals usable for 30 s: a late scrape on a loaded machine must not make both ranks look saturated.
    url = await start_router(backends, policy={"preset": "least_load", "settings": {"stale_after_s": 30.0}})
    async with httpx.AsyncClient(timeout=10) as c:

        async def listed() -> dict[str, dict[str, object]]:
            return {b["id"]: b for b in (await c.get(f"{url}/admin/backends")).json()["backends"]}

        deadline = asyncio.get_running_loop().time() + 60.0
        while asyncio.get_running_loop().time() < deadline:  # until a scrape has landed for both ranks
            view = await listed()
            if all(b["queue"] is not None for b in view.values()):
                break
            await asyncio.sleep(0.02)
        assert view[f"{dp_engine.url}#dp0"]["queue"] == 40
        assert view[f"{dp_engine.url}#dp1"]["queue"] == 0
        assert view[f"{dp_engine.url}#dp1"]["dp_rank"] == 1
        for i in range(6):
            body = {"model": MODEL, "prompt": f"q {i}", "max_tokens": 1}
            assert (await c.post(f"{url}/v1/completions", json=body)).status_code == 200
    assert dp_engine.ranks_seen == ["1"] * 6


async def test_each_pd_leg_is_pinned_to_its_own_rank(
    dp_engine: FakeDPEngine, start_router: StartRouter
) -> None:
    """Rank 0 prefills and rank 1 decodes, behind one URL: the prefill leg must carry rank 0, not the
    decode backend's rank."""
    backends = [
        Backend(id="dp0", url=dp_engine.url, dp_rank=0, engine="vllm", role="prefill", group="g0"),
        Backend(id="dp1", url=dp_engine.url, dp_rank=1, engine="vllm", role="decode", group="g0"),
    ]
    url = await start_router(backends, pd_min_uncached_tokens=16)
    prompt = " ".join(f"w{i}" for i in range(300))
    async with httpx.AsyncClient(timeout=10) as c:
        r = await c.post(f"{url}/v1/completions", json={"model": MODEL, "prompt": prompt, "max_tokens": 2})
    assert r.status_code == 200
    assert dp_engine.ranks_seen == ["0", "1"]
