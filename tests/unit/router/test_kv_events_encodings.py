"""The router's KV-event subscriber on a real ZMQ PUB socket: both event encodings reach the index."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import msgpack
import pytest
import zmq
import zmq.asyncio

from infctl.router import RequestInfo, RouterCore, build_policy
from infctl.router.kv_events import KVSource, KVStats, subscribe
from infctl.sim.kv_events import KVEventPublisher
from infctl.telemetry.kv_events import BlockRemoved, BlockStored, KVEventEncoding

PREFIX = tuple(range(1000, 1032))


def probe() -> RequestInfo:
    return RequestInfo("p", prompt_tokens=16 * len(PREFIX), block_hashes=PREFIX)


async def _until(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(30):
        while not condition():
            await asyncio.sleep(0.01)


@pytest.mark.parametrize("encoding", ["map", "array"])
async def test_the_subscriber_indexes_either_encoding(encoding: KVEventEncoding) -> None:
    core = RouterCore(build_policy({"preset": "cache_aware", "index": "precise"}))
    publisher = KVEventPublisher("tcp://127.0.0.1:*", topic="kv", encoding=encoding)
    stop, stats = asyncio.Event(), KVStats()
    task = asyncio.create_task(
        subscribe(core, KVSource(publisher.endpoint, {None: "e0"}, topic="kv"), stop, stats)
    )
    try:
        # ZMQ's slow joiner: publish until the subscription has reached the publisher.
        async with asyncio.timeout(30):
            while stats.batches == 0:
                publisher.publish([BlockStored(list(PREFIX[:1]), None, [], 16)])
                await asyncio.sleep(0.02)
        publisher.publish([BlockStored(list(PREFIX[1:]), PREFIX[0], [], 16)])
        await _until(lambda: core.matches(probe()) == {"e0": len(PREFIX)})
        publisher.publish([BlockRemoved(list(PREFIX[8:]))])
        await _until(lambda: core.matches(probe()) == {"e0": 8})
        assert stats.undecodable == 0
    finally:
        stop.set()
        await task
        publisher.close()


async def test_a_batch_that_is_not_kv_events_is_counted_and_skipped() -> None:
    core = RouterCore(build_policy({"preset": "cache_aware", "index": "precise"}))
    ctx = zmq.asyncio.Context.instance()
    pub = ctx.socket(zmq.PUB)
    pub.bind("tcp://127.0.0.1:*")
    endpoint = pub.getsockopt_string(zmq.LAST_ENDPOINT)
    stop, stats = asyncio.Event(), KVStats()
    task = asyncio.create_task(subscribe(core, KVSource(endpoint, {None: "e0"}), stop, stats))
    try:
        async with asyncio.timeout(30):
            while stats.undecodable == 0:
                await pub.send_multipart([b"", (0).to_bytes(8, "big"), msgpack.packb([1.0, [["Nope"]], 0])])
                await asyncio.sleep(0.02)
        assert stats.batches == 0 and core.matches(probe()) == {}
    finally:
        stop.set()
        await task
        pub.close(linger=0)
