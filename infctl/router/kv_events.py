"""Subscribing to engines' KV-cache events (vLLM ZMQ format) to keep the precise prefix index current.

One SUB socket per engine endpoint. Batches carry the data-parallel rank they came from, which maps to the
router's per-rank backend ids, so a DP engine's ranks are indexed apart like separate engines.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from infctl.router.core import RouterCore
from infctl.telemetry.kv_events import decode_message

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class KVSource:
    """Where one engine publishes, and which backend id each of its DP ranks is."""

    endpoint: str
    """ZMQ endpoint to connect to, e.g. ``tcp://10.0.0.7:5557``."""
    backends: Mapping[int | None, str]
    """DP rank (None: the engine is not data-parallel) -> backend id."""
    topic: str = ""


@dataclass
class KVStats:
    batches: int = 0
    missed: int = 0
    """Batches lost (sequence gaps); the index may hold blocks the engine has since evicted."""
    undecodable: int = 0


async def subscribe(
    core: RouterCore,
    source: KVSource,
    stop: asyncio.Event,
    stats: KVStats,
    *,
    on_batch: Callable[[str], None] | None = None,
) -> None:
    """Apply every batch from ``source`` to ``core``'s precise index until ``stop`` is set."""
    import zmq  # here, not at the top: a router that follows no engine's events never loads ZeroMQ
    import zmq.asyncio

    ctx = zmq.asyncio.Context.instance()
    sock = ctx.socket(zmq.SUB)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt_string(zmq.SUBSCRIBE, source.topic)
    sock.connect(source.endpoint)
    stopping = asyncio.create_task(stop.wait())
    try:
        while not stop.is_set():
            recv = asyncio.ensure_future(sock.recv_multipart())
            done, _ = await asyncio.wait({recv, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if recv not in done:
                recv.cancel()
                break
            try:
                msg = decode_message(recv.result())
            except ValueError as exc:
                stats.undecodable += 1
                log.debug("undecodable KV event from %s: %s", source.endpoint, exc)
                continue
            backend = source.backends.get(msg.batch.data_parallel_rank) or source.backends.get(None)
            if backend is None:
                continue
            result = core.apply_kv_events(backend, msg.seq, msg.batch.events)
            stats.batches += 1
            if result.missed:
                stats.missed += result.missed
                log.warning("missed %d KV event batches from %s", result.missed, backend)
            if on_batch is not None:
                on_batch(backend)
    finally:
        stopping.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await stopping
        sock.close(linger=0)
