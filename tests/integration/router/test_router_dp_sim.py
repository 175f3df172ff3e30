"""Router + a simulated data-parallel engine (2 ranks behind one URL), the vLLM way and the SGLang way.

Rank 0 is kept busy by streams sent straight to the engine, pinned with the adapter's own pin; the router
must see each rank's load in the engine's one /metrics (split by the adapter's rank label) and pin its own
requests to the idle rank the way the engine reads a pin.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from infctl.engines import get_adapter
from infctl.router.snapshot import Backend
from infctl.sim.dp import DPEngine
from infctl.sim.server import SimCluster
from infctl.sim.settings import SimSettings

BUSY_STREAMS = 6


@contextlib.asynccontextmanager
async def dp_engine(personality: str) -> AsyncIterator[DPEngine]:
    cluster = SimCluster(SimSettings(personality=personality, port=0, time_scale=1.0, data_parallel_size=2))
    await cluster.start()
    try:
        engine = cluster.instances[0]
        assert isinstance(engine, DPEngine)
        yield engine
    finally:
        await cluster.close()


async def _hold(client: httpx.AsyncClient, url: str, headers: dict[str, str], body: dict[str, Any]) -> None:
    async with client.stream("POST", url, headers=headers, json=body) as resp:
        async for _ in resp.aiter_bytes():
            pass


@pytest.mark.parametrize("personality", ["vllm", "sglang"])
async def test_router_sees_each_ranks_load_and_pins_to_the_idle_rank(personality: str, start_router) -> None:
    adapter = get_adapter(personality)
    async with dp_engine(personality) as engine, httpx.AsyncClient(timeout=30) as client:
        pin0 = adapter.pin_rank(0)
        busy = [
            asyncio.create_task(
                _hold(client, f"{engine.url}/v1/completions", dict(pin0.headers),
                      {"prompt": f"long {i}", "max_tokens": 2000, "stream": True, **pin0.body})
            )
            for i in range(BUSY_STREAMS)
        ]  # fmt: skip
        try:
            backends = [
                Backend(id=f"{engine.url}#dp{r}", url=engine.url, dp_rank=r, engine=personality)
                for r in (0, 1)
            ]
            # Signals stay usable for 30 s: on a loaded machine a scrape can come later than the default
            # 0.2 s, and stale signals make both ranks look saturated, so the pick would be a coin toss.
            policy = {"preset": "least_load", "settings": {"stale_after_s": 30.0}}
            url = await start_router(backends, policy=policy)
            view: dict[str, dict[str, object]] = {}
            deadline = asyncio.get_running_loop().time() + 60.0
            while asyncio.get_running_loop().time() < deadline:  # until a scrape shows rank 0's streams
                listed = (await client.get(f"{url}/admin/backends")).json()["backends"]
                view = {b["id"]: b for b in listed}
                if view[f"{engine.url}#dp0"]["running"] == BUSY_STREAMS:
                    break
                await asyncio.sleep(0.02)
            assert view[f"{engine.url}#dp0"]["running"] == BUSY_STREAMS
            assert view[f"{engine.url}#dp1"]["running"] == 0
            for i in range(4):
                body = {"model": engine.model, "prompt": f"q {i}", "max_tokens": 2}
                assert (await client.post(f"{url}/v1/completions", json=body)).status_code == 200
            rank0, rank1 = engine.ranks
            assert sum(rank1.metrics.finished.values()) == 4
            assert sum(rank0.metrics.finished.values()) == 0
            assert rank0.stats().running == BUSY_STREAMS
        finally:
            for task in busy:
                task.cancel()
            await asyncio.gather(*busy, return_exceptions=True)
