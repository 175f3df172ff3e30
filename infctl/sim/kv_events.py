"""Publishing the simulated engine's KV cache events over ZMQ PUB, in vLLM's wire format.

The records and codec live in :mod:`infctl.telemetry.kv_events`, shared with the router's subscriber.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import zmq

from infctl.telemetry.kv_events import Event, KVEventEncoding, encode_batch


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
