"""The lean front over real sockets: a client trickling its head is answered 408 and cut once
``header_timeout_s`` has passed, an idle keep-alive connection is kept ``keepalive_timeout_s`` (not the head's
deadline), and ``max_connections`` turns newcomers away while every slot is busy."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from infctl.router.config import RouterConfig
from infctl.router.server import serve
from infctl.router.snapshot import Backend

PARTIAL = b"POST /v1/completions HTTP/1.1\r\nhost: r\r\n"
BODY = b'{"model": "m", "prompt": "hi"}'
POST = PARTIAL + b"content-length: %d\r\n\r\n%s" % (len(BODY), BODY)


@pytest.fixture
async def lean_router() -> AsyncIterator[Any]:
    running: list[tuple[asyncio.Event, asyncio.Task[None]]] = []

    async def start(**fields: Any) -> tuple[str, int]:
        cfg = RouterConfig(backends=(Backend(id="e", url="http://127.0.0.1:9"),), port=0, **fields)
        stop, urls = asyncio.Event(), list[str]()
        task = asyncio.create_task(serve(cfg, stop=stop, on_ready=urls.append, server="lean"))
        running.append((stop, task))
        while not urls:
            if task.done():
                task.result()
            await asyncio.sleep(0.005)
        parts = urlsplit(urls[0])
        assert parts.hostname is not None and parts.port is not None
        return parts.hostname, parts.port

    yield start
    for stop, task in running:
        stop.set()
        await task


async def test_a_partial_head_is_answered_408_and_the_connection_closed(lean_router: Any) -> None:
    host, port = await lean_router(header_timeout_s=0.2, drain_timeout_s=1.0)
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(PARTIAL)
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 20)  # until the router closes the connection
    writer.close()
    assert answer.startswith(b"HTTP/1.1 408 ") and b'"type": "BadRequestError"' in answer


async def test_beyond_max_connections_a_newcomer_gets_503_while_the_others_are_busy(lean_router: Any) -> None:
    host, port = await lean_router(max_connections=2, drain_timeout_s=1.0)
    busy = [await asyncio.open_connection(host, port) for _ in range(2)]
    for _, writer in busy:
        writer.write(PARTIAL)  # each holds a request head on its way: not idle, so not closed for room
        await writer.drain()
    await asyncio.sleep(0.05)  # let the router accept both
    reader, writer = await asyncio.open_connection(host, port)
    answer = await asyncio.wait_for(reader.read(), 20)
    writer.close()
    assert answer.startswith(b"HTTP/1.1 503 ") and b"max_connections 2" in answer
    for _, w in busy:
        w.close()


async def engine_ejected(host: str, port: int) -> None:
    """Until the health probe has ejected the only engine (it refuses connections): from then on a generation
    request gets the router's own 503. Before, the router tries the engine and answers 502, which a loaded
    machine's late first probe left to a test's first request."""
    async with httpx.AsyncClient(timeout=10) as c, asyncio.timeout(30):
        while not (await c.get(f"http://{host}:{port}/admin/backends")).json()["backends"][0]["ejected"]:
            await asyncio.sleep(0.02)


async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bytes:
    """Send one generation POST and read its whole answer (a 503 once :func:`engine_ejected`)."""
    writer.write(POST)
    await writer.drain()
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 20)
    length = next(
        int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.startswith(b"content-length:")
    )
    return head + await reader.readexactly(length)


async def test_a_connection_idle_past_the_header_timeout_is_reused(lean_router: Any) -> None:
    # A client's pool keeps a connection idle longer than a head may take (aiohttp's: 15 s against 10 s).
    host, port = await lean_router(header_timeout_s=0.1, keepalive_timeout_s=30.0, drain_timeout_s=1.0)
    await engine_ejected(host, port)
    reader, writer = await asyncio.open_connection(host, port)
    assert (await answer(reader, writer)).startswith(b"HTTP/1.1 503 ")
    await asyncio.sleep(0.6)  # six head deadlines, many sweeps (every 25 ms)
    assert (await answer(reader, writer)).startswith(b"HTTP/1.1 503 ")
    writer.close()


async def test_a_connection_idle_past_the_keepalive_timeout_is_closed(lean_router: Any) -> None:
    host, port = await lean_router(keepalive_timeout_s=0.2, drain_timeout_s=1.0)
    await engine_ejected(host, port)
    reader, writer = await asyncio.open_connection(host, port)
    assert (await answer(reader, writer)).startswith(b"HTTP/1.1 503 ")
    assert await asyncio.wait_for(reader.read(), 20) == b""  # the router closes it, quietly
    writer.close()
