"""vLLM-format KV cache events: the records, and the wire codec engines publish and routers subscribe with.

Wire format (vLLM ``ZmqEventPublisher``): a multipart message of three frames,

1. the topic (UTF-8; vLLM's default is empty),
2. the batch sequence number, 8 bytes big-endian, counting from 0 per publisher,
3. a msgpack ``KVEventBatch``, encoded as msgspec ``array_like`` structs: ``[ts, [event, ...], dp_rank]``
   where each event is a tagged array,
   ``["BlockStored", block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium]``,
   ``["BlockRemoved", block_hashes, medium]`` or ``["AllBlocksCleared"]``.

The decoder also accepts the map forms newer vLLM versions emit (``{"ts":..., "events":...}`` and
``{"type": "BlockStored", ...}``), trailing fields it does not know, and byte-string block hashes
(read as big-endian integers), so a router can subscribe to real engines with it too.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import msgpack

MEDIUM_GPU = "GPU"
MEDIUM_CPU = "CPU"
"""A second KV tier in host memory (vLLM's offloading connector publishes its stores and evictions so)."""


@dataclass(frozen=True, slots=True)
class BlockStored:
    """Full blocks that became cached (vLLM KV event BlockStored)."""

    block_hashes: list[int]
    parent_block_hash: int | None
    token_ids: list[int]
    block_size: int
    medium: str = MEDIUM_GPU
    """Where the blocks are stored: "GPU" (HBM) or "CPU" (an offload tier)."""


@dataclass(frozen=True, slots=True)
class BlockRemoved:
    """Cached blocks evicted from the pool (vLLM KV event BlockRemoved)."""

    block_hashes: list[int]
    medium: str = MEDIUM_GPU
    """The tier they left: "GPU" or "CPU"."""


@dataclass(frozen=True, slots=True)
class AllBlocksCleared:
    """Every cached block was dropped (vLLM KV event AllBlocksCleared)."""


Event = BlockStored | BlockRemoved | AllBlocksCleared
KVEvent = BlockStored | BlockRemoved
"""What an engine core reports per step (AllBlocksCleared comes only from a cache reset)."""


@dataclass(frozen=True, slots=True)
class EventBatch:
    """The events of one engine step."""

    ts: float
    """Wall-clock time (Unix seconds) the batch was published."""
    events: list[Event]
    data_parallel_rank: int | None = None


@dataclass(frozen=True, slots=True)
class KVEventMessage:
    """One decoded multipart message."""

    topic: str
    seq: int
    batch: EventBatch


def _encode_event(ev: Event) -> list[Any]:
    if isinstance(ev, BlockStored):
        return [
            "BlockStored",
            ev.block_hashes,
            ev.parent_block_hash,
            ev.token_ids,
            ev.block_size,
            None,
            ev.medium,
        ]
    if isinstance(ev, BlockRemoved):
        return ["BlockRemoved", ev.block_hashes, ev.medium]
    return ["AllBlocksCleared"]


def encode_batch(events: Iterable[Event], *, ts: float | None = None, dp_rank: int = 0) -> bytes:
    """The msgpack payload (frame 3) of one batch."""
    body = [time.time() if ts is None else ts, [_encode_event(e) for e in events], dp_rank]
    out: bytes = msgpack.packb(body, use_bin_type=True)
    return out


def _hash(value: Any) -> int:
    if isinstance(value, bytes | bytearray):
        return int.from_bytes(value, "big")
    return int(value)


def _hashes(values: Any) -> list[int]:
    return [_hash(v) for v in values or ()]


def _medium(value: Any) -> str:
    """Older vLLM sends no medium (or None): those events are about HBM."""
    return value if isinstance(value, str) and value else MEDIUM_GPU


def _decode_event(raw: Any) -> Event:
    if isinstance(raw, dict):
        tag = raw.get("type")
        if tag == "BlockStored":
            parent = raw.get("parent_block_hash")
            return BlockStored(
                block_hashes=_hashes(raw.get("block_hashes")),
                parent_block_hash=None if parent is None else _hash(parent),
                token_ids=list(raw.get("token_ids") or ()),
                block_size=int(raw.get("block_size") or 0),
                medium=_medium(raw.get("medium")),
            )
        if tag == "BlockRemoved":
            return BlockRemoved(
                block_hashes=_hashes(raw.get("block_hashes")), medium=_medium(raw.get("medium"))
            )
        if tag == "AllBlocksCleared":
            return AllBlocksCleared()
        raise ValueError(f"unknown KV event {tag!r}")
    if isinstance(raw, list | tuple) and raw:
        tag = raw[0]
        if tag == "BlockStored" and len(raw) >= 5:
            parent = raw[2]
            return BlockStored(
                block_hashes=_hashes(raw[1]),
                parent_block_hash=None if parent is None else _hash(parent),
                token_ids=list(raw[3] or ()),
                block_size=int(raw[4]),
                medium=_medium(raw[6] if len(raw) > 6 else None),
            )
        if tag == "BlockRemoved" and len(raw) >= 2:
            return BlockRemoved(
                block_hashes=_hashes(raw[1]), medium=_medium(raw[2] if len(raw) > 2 else None)
            )
        if tag == "AllBlocksCleared":
            return AllBlocksCleared()
    raise ValueError(f"malformed KV event {raw!r:.80}")


def decode_batch(payload: bytes) -> EventBatch:
    """Decode frame 3; raises ValueError when it is not a KV event batch."""
    try:
        raw = msgpack.unpackb(payload, raw=False, strict_map_key=False)
    except Exception as exc:  # msgpack raises several unrelated types
        raise ValueError(f"not msgpack: {exc}") from None
    if isinstance(raw, dict):
        ts, events, rank = raw.get("ts"), raw.get("events"), raw.get("data_parallel_rank")
    elif isinstance(raw, list | tuple) and len(raw) >= 2:
        ts, events, rank = raw[0], raw[1], raw[2] if len(raw) > 2 else None
    else:
        raise ValueError("not a KV event batch")
    if not isinstance(events, list | tuple):
        raise ValueError("KV event batch without an event list")
    return EventBatch(
        float(ts or 0.0), [_decode_event(e) for e in events], None if rank is None else int(rank)
    )


def decode_message(frames: Sequence[bytes]) -> KVEventMessage:
    """Decode one ``recv_multipart()`` result: ``[topic, seq, payload]``."""
    if len(frames) != 3:
        raise ValueError(f"expected 3 frames, got {len(frames)}")
    topic, seq, payload = frames
    return KVEventMessage(
        bytes(topic).decode(), int.from_bytes(seq, "big", signed=True), decode_batch(payload)
    )
