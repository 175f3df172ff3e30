"""A data-parallel simulated engine publishes KV events the vLLM way (one publisher per rank, on the base
port + rank, batches tagged with the rank), read by the router's own subscriber into its precise index."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import httpx
import pytest

from infctl import tokens
from infctl.engines import get_adapter
from infctl.errors import ConfigError
from infctl.router import RouterCore, build_policy
from infctl.router.kv_events import KVSource, KVStats, subscribe
from infctl.router.ranks import backend_id, rank_endpoint
from infctl.router.snapshot import RequestInfo
from infctl.sim.dp import DPEngine
from infctl.sim.server import SimCluster
from infctl.sim.settings import SimSettings


async def _until(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(10):
        while not condition():
            await asyncio.sleep(0.02)


@pytest.mark.parametrize("personality", ["vllm", "sglang"])
async def test_each_rank_is_indexed_apart_by_the_routers_subscriber(personality: str) -> None:
    settings = SimSettings(
        personality=personality, port=0, time_scale=0.1, data_parallel_size=2, kv_events_port=0
    )
    cluster = SimCluster(settings)
    await cluster.start()
    engine = cluster.instances[0]
    assert isinstance(engine, DPEngine) and engine.kv_endpoint is not None
    adapter = get_adapter(personality)
    core = RouterCore(build_policy({"preset": "cache_aware", "index": "precise"}))
    ids = [backend_id(engine.url, r) for r in (0, 1)]
    stop = asyncio.Event()
    stats = [KVStats(), KVStats()]
    # Only the rank's own id: a batch that does not name its rank would be dropped, not indexed.
    subs = [
        asyncio.create_task(
            subscribe(core, KVSource(rank_endpoint(engine.kv_endpoint, r), {r: ids[r]}), stop, stats[r])
        )
        for r in (0, 1)
    ]

    async def ask(client: httpx.AsyncClient, rank: int, prompt: str) -> None:
        pin = adapter.pin_rank(rank)
        body = {"model": engine.model, "prompt": prompt, "max_tokens": 1, **pin.body}
        assert (
            await client.post(f"{engine.url}/v1/completions", json=body, headers=dict(pin.headers))
        ).is_success

    try:
        async with httpx.AsyncClient(timeout=20) as client:
            for r in (0, 1):  # ZMQ's slow joiner: until each subscription has seen a batch of its rank
                async with asyncio.timeout(10):
                    n = 0
                    while stats[r].batches == 0:
                        n += 1
                        await ask(client, r, tokens.synth_words(40, salt=100 * r + n))
                        await asyncio.sleep(0.05)
            prompts = [tokens.synth_words(200, salt=7), tokens.synth_words(200, salt=8)]
            for r in (0, 1):
                await ask(client, r, prompts[r])
        infos = [
            RequestInfo.from_ids(f"p{r}", tokens.token_ids(prompts[r]), model=engine.model) for r in (0, 1)
        ]
        blocks = [info.num_blocks for info in infos]
        assert min(blocks) >= 4
        await _until(lambda: [core.matches(i) for i in infos] == [{ids[0]: blocks[0]}, {ids[1]: blocks[1]}])
        # Each rank numbers its own batches: no rank sees gaps left by the other's.
        assert [(s.missed, s.undecodable) for s in stats] == [(0, 0), (0, 0)]
    finally:
        stop.set()
        await asyncio.gather(*subs)
        await cluster.close()


async def test_rank_r_of_engine_i_binds_the_base_port_plus_i_times_ranks_plus_r() -> None:
    import zmq
    import zmq.asyncio

    # Any free run of 4 ports: bind a throwaway run, free it, ask the simulator for the same place.
    ctx = zmq.asyncio.Context.instance()
    probe = ctx.socket(zmq.PUB)
    probe.bind("tcp://127.0.0.1:*")
    base = int(probe.getsockopt_string(zmq.LAST_ENDPOINT).rpartition(":")[2])
    probe.close(linger=0)
    settings = SimSettings(port=0, host="127.0.0.1", data_parallel_size=2, instances=2, kv_events_port=base)
    cluster = SimCluster(settings)
    try:
        await cluster.start()
    except ConfigError:
        pytest.skip("another process took one of the four ports after the probe")
    try:
        endpoints = [
            r.publisher.endpoint
            for e in cluster.instances
            if isinstance(e, DPEngine)
            for r in e.ranks
            if r.publisher is not None
        ]
        assert endpoints == [f"tcp://127.0.0.1:{base + k}" for k in range(4)]
        assert [e.kv_endpoint for e in cluster.instances] == [endpoints[0], endpoints[2]]
    finally:
        await cluster.close()


async def test_a_taken_port_is_a_config_error_naming_the_layout() -> None:
    import zmq

    ctx = zmq.Context.instance()
    taken = ctx.socket(zmq.PUB)
    taken.bind("tcp://127.0.0.1:*")
    port = int(taken.getsockopt_string(zmq.LAST_ENDPOINT).rpartition(":")[2])
    try:
        # Rank 1 of the engine wants port + 1... so give it a base one below the taken port.
        cluster = SimCluster(
            SimSettings(port=0, host="127.0.0.1", data_parallel_size=2, kv_events_port=port - 1)
        )
        with pytest.raises(ConfigError) as err:
            await cluster.start()
        assert "port + i * ranks + r" in (err.value.hint or "")
        await cluster.close()
    finally:
        taken.close(linger=0)
