"""The router's precise prefix index against a simulated data-parallel engine, set up as an operator would:
one backend entry per rank, each naming the engine's one (base) KV-events endpoint.

The router subscribes rank r at the base port + r (``router.config.from_file``); the simulator publishes each
rank's events there, tagged with the rank. With speculative entries off, only real KV events can keep
requests that share a long prefix on the rank that cached it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from kvkit import kv_batches, until_batches, until_subscribed

from infctl import tokens
from infctl.config.router import RouterFile
from infctl.router.config import from_file
from infctl.sim.dp import DPEngine
from infctl.sim.server import SimCluster
from infctl.sim.settings import SimSettings

StartRouter = Callable[..., Awaitable[str]]
FOLLOWERS = 8


@pytest.mark.parametrize("personality", ["vllm", "sglang"])
async def test_requests_sharing_a_prefix_follow_the_rank_that_cached_it(
    personality: str, start_router: StartRouter
) -> None:
    cluster = SimCluster(
        SimSettings(personality=personality, port=0, time_scale=0.2, data_parallel_size=2, kv_events_port=0)
    )
    await cluster.start()
    try:
        engine = cluster.instances[0]
        assert isinstance(engine, DPEngine) and engine.kv_endpoint is not None
        rf = RouterFile(
            engine=personality,
            backends=[{"url": engine.url, "dp_rank": r, "kv_events": engine.kv_endpoint} for r in (0, 1)],  # type: ignore[list-item]
        )
        cfg = from_file(rf)
        policy: dict[str, Any] = {"preset": "prefix_precise", "settings": {"speculative_ttl_s": 0.0}}
        url = await start_router(list(cfg.backends), policy=policy, kv_sources=cfg.kv_sources)
        system = tokens.synth_words(600, salt=3)
        async with httpx.AsyncClient(timeout=20) as client:
            # ZMQ slow joiner: each rank's events reach the router before the test's first request.
            await until_subscribed(client, url, cfg.backends, model=engine.model, engine=personality)
            warm = [sum(r.metrics.finished.values()) for r in engine.ranks]

            async def ask(j: int) -> None:
                body = {"model": engine.model, "prompt": f"{system} question {j}", "max_tokens": 2}
                assert (await client.post(f"{url}/v1/completions", json=body)).status_code == 200

            before = await kv_batches(client, url)
            await ask(0)
            holder = next(r for r in engine.ranks if sum(r.metrics.finished.values()) == warm[r.dp_rank] + 1)
            await until_batches(client, url, before + 1)  # the holder's BlockStored batch is in the index
            for j in range(1, FOLLOWERS + 1):
                await ask(j)
        served = [sum(r.metrics.finished.values()) - w for r, w in zip(engine.ranks, warm, strict=True)]
        assert served[holder.dp_rank] == FOLLOWERS + 1, served
    finally:
        await cluster.close()
