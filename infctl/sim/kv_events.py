"""Publishing the simulated engine's KV cache events over ZMQ PUB, in vLLM's wire format.

The records and codec live in :mod:`infctl.telemetry.kv_events`, shared with the router's subscriber.

A data-parallel engine publishes the way vLLM does (``ZmqEventPublisher``: "each DP rank runs its own
EventPublisher instance"; SGLang copies it): rank r binds its own PUB socket on the base port + r
(``offset_endpoint_port``), keeps its own sequence numbers and tags every batch with ``data_parallel_rank``
r, which is what a router's per-rank subscription expects (``infctl.router.ranks.rank_endpoint``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import zmq

from infctl.errors import ConfigError
from infctl.telemetry.kv_events import Event, KVEventEncoding, encode_batch

BIND_ATTEMPTS = 8
"""Tries to find a free run of consecutive ports when any port will do (another process may take one)."""


class KVEventPublisher:
    """ZMQ PUB socket publishing one batch per engine step (never blocks: drops at the high-water mark)."""

    def __init__(
        self,
        endpoint: str,
        *,
        topic: str = "",
        dp_rank: int = 0,
        hwm: int = 100_000,
        encoding: KVEventEncoding = "map",
    ) -> None:
        self._socket: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.PUB)
        self._socket.set_hwm(hwm)
        self._socket.bind(endpoint)
        self.endpoint: str = self._socket.getsockopt_string(zmq.LAST_ENDPOINT)
        """The bound endpoint, with the real port when ``endpoint`` asked for any (``tcp://127.0.0.1:*``)."""
        self._topic = topic.encode()
        self._dp_rank = dp_rank
        self._seq = 0
        self._encoding: KVEventEncoding = encoding

    def publish(self, events: Sequence[Event], *, ts: float | None = None) -> None:
        if not events:
            return
        frames = (
            self._topic,
            self._seq.to_bytes(8, "big"),
            encode_batch(events, ts=ts, dp_rank=self._dp_rank, encoding=self._encoding),
        )
        self._seq += 1
        # PUB drops at the high-water mark rather than blocking; Again is only a safety net.
        with contextlib.suppress(zmq.Again):
            self._socket.send_multipart(frames, flags=zmq.NOBLOCK)

    def close(self) -> None:
        self._socket.close(linger=0)


def bind_ranks(
    host: str,
    first_port: int | None,
    ranks: int,
    *,
    topic: str = "",
    encoding: KVEventEncoding = "map",
) -> list[KVEventPublisher]:
    """One publisher per data-parallel rank, rank r on ``first_port + r`` and tagging its batches r.

    ``host`` ``*`` binds every interface; ``first_port`` None takes any free run of ``ranks`` ports. Raises
    ConfigError (what to change) when the ports cannot be bound."""
    error: zmq.ZMQError | None = None
    for _ in range(1 if first_port is not None else BIND_ATTEMPTS):
        try:
            return _bind_run(host, first_port, ranks, topic, encoding)
        except zmq.ZMQError as err:
            error = err
    where = f"tcp://{host}:{'*' if first_port is None else first_port}"
    raise ConfigError(
        f"cannot publish KV events on {where} ({ranks} consecutive port(s)): {error}",
        hint="pick another --kv-events-port (engine i's rank r uses port + i * ranks + r)",
    )


def _bind_run(
    host: str, first_port: int | None, ranks: int, topic: str, encoding: KVEventEncoding
) -> list[KVEventPublisher]:
    """Rank 0 on ``first_port`` (None: any), the others right after it; nothing stays bound on failure."""
    bound: list[KVEventPublisher] = []
    try:
        base = first_port
        for rank in range(ranks):
            port = "*" if base is None else base + rank
            pub = KVEventPublisher(f"tcp://{host}:{port}", topic=topic, dp_rank=rank, encoding=encoding)
            bound.append(pub)
            base = int(pub.endpoint.rpartition(":")[2]) - rank
    except zmq.ZMQError:
        for pub in bound:
            pub.close()
        raise
    return bound
