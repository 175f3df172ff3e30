"""KV events reachable: subscribe to an engine's ZMQ publisher, provoke a batch, decode it.

A PUB socket drops what it publishes before a subscriber has joined, so the subscription settles for a
moment before the provoking request is sent; any decodable batch (ours or other traffic's) proves the
path works.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

import zmq
import zmq.asyncio

from infctl.doctor.result import CheckResult, Group, failed, passed
from infctl.telemetry.kv_events import KVEventMessage, decode_message

G: Group = "engines"
SETTLE_S = 0.3
"""Seconds a new SUB socket gets to join before the provoking request (ZMQ's slow-joiner problem)."""


def subscriber_endpoint(endpoint: str, engine_url: str) -> str:
    """What a subscriber connects to: a wildcard bind address (``tcp://*:5557``) gets the engine's host."""
    scheme, _, rest = endpoint.partition("://")
    host, sep, port = rest.rpartition(":")
    if sep and host in ("*", "0.0.0.0", "", "[::]"):
        return f"{scheme}://{urlsplit(engine_url).hostname}:{port}"
    return endpoint


def provoking_prompt(words: int = 96) -> str:
    """A prompt no cache holds yet, long enough to fill several KV blocks (so BlockStored is emitted)."""
    nonce = secrets.token_hex(4)
    return " ".join(f"doctor{nonce}w{i}" for i in range(words))


def evaluate_kv_message(
    endpoint: str,
    message: KVEventMessage | None,
    *,
    error: str | None = None,
    waited_s: float = 0.0,
    target: str = "",
) -> CheckResult:
    """Pure verdict on what the subscription received."""
    if error is not None:
        return failed(
            G,
            "kv events",
            f"{endpoint}: {error}",
            "the publisher must speak vLLM's format: [topic, 8-byte seq, msgpack batch]",
            target=target,
        )
    if message is None:
        return failed(
            G,
            "kv events",
            f"no KV event batch from {endpoint} within {waited_s:g} s of a request",
            "start the engine with --kv-events-config (publisher zmq, endpoint tcp://*:PORT) and open PORT "
            "to the router",
            target=target,
        )
    kinds = sorted({type(e).__name__ for e in message.batch.events})
    topic = f", topic {message.topic!r}" if message.topic else ""
    return passed(
        G,
        "kv events",
        f"{endpoint}: batch #{message.seq} with {len(message.batch.events)} "
        f"events ({', '.join(kinds) or 'none'}){topic}",
        target=target,
    )


async def check_kv_events(
    endpoint: str, provoke: Callable[[], Awaitable[object]] | None, *, wait_s: float, target: str = ""
) -> CheckResult:
    """Subscribe to ``endpoint``, run ``provoke`` (a small request), and wait for one batch."""
    sock = zmq.asyncio.Context.instance().socket(zmq.SUB)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt_string(zmq.SUBSCRIBE, "")
    try:
        sock.connect(endpoint)
        await asyncio.sleep(SETTLE_S)
        background = asyncio.ensure_future(provoke()) if provoke is not None else None
        try:
            async with asyncio.timeout(wait_s):
                frames = await sock.recv_multipart()
        except TimeoutError:
            return evaluate_kv_message(endpoint, None, waited_s=wait_s, target=target)
        finally:
            if background is not None:
                await _cancel(background)
        try:
            message = decode_message(frames)
        except ValueError as exc:
            return evaluate_kv_message(endpoint, None, error=f"undecodable batch: {exc}", target=target)
        return evaluate_kv_message(endpoint, message, target=target)
    except zmq.ZMQError as exc:
        return evaluate_kv_message(endpoint, None, error=f"cannot subscribe: {exc}", target=target)
    finally:
        sock.close(linger=0)


async def _cancel(task: asyncio.Future[object]) -> None:
    """Stop the provoking request if it still runs; its outcome does not matter here."""
    task.cancel()
    await asyncio.wait([task])
    if not task.cancelled():
        task.exception()  # retrieved, so asyncio does not log it as never retrieved
