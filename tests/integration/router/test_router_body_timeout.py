"""A client trickling its request body gets a 408 and loses the connection once ``body_timeout_s`` has
passed, on either front (aiohttp's has no body deadline of its own)."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlsplit

from infctl.router.snapshot import Backend

HEAD = b"POST /v1/completions HTTP/1.1\r\nhost: r\r\ncontent-type: application/json\r\n"


async def test_a_body_that_stops_arriving_gets_408_and_the_connection_closed(start_router: Any) -> None:
    url = await start_router([Backend(id="e", url="http://127.0.0.1:9")], body_timeout_s=0.3)
    parts = urlsplit(url)
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    writer.write(HEAD + b"x-request-id: slow-1\r\ncontent-length: 100\r\n\r\n" + b'{"prompt": "')
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 20)  # until the router closes the connection
    writer.close()
    assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
    assert b"x-request-id: slow-1" in answer.lower()


async def test_a_whole_body_is_served_as_usual(start_router: Any, start_sim: Any) -> None:
    sim = await start_sim()
    # A deadline far past the 0.1 s gap: a loaded machine that runs the gap's end and the deadline in one
    # loop turn must not make a served body look like a stalled one.
    url = await start_router([Backend(id=u, url=u) for u in sim.urls], body_timeout_s=10.0)
    parts = urlsplit(url)
    body = b'{"model": "meta-llama/Llama-3.1-8B-Instruct", "prompt": "hi there", "max_tokens": 2}'
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    writer.write(HEAD + b"content-length: %d\r\nconnection: close\r\n\r\n" % len(body))
    await writer.drain()
    await asyncio.sleep(0.1)  # the body follows the head in its own packet, well within the deadline
    writer.write(body)
    answer = await asyncio.wait_for(reader.read(), 20)
    writer.close()
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:300]


async def test_a_head_trickled_after_a_first_answer_is_cut_by_header_timeout(start_router: Any) -> None:
    # The lean front hands a GET over to aiohttp with its connection; aiohttp has no head deadline of its
    # own, so its keep-alive timeout (header_timeout_s) is what ends a head that never completes.
    url = await start_router([Backend(id="e", url="http://127.0.0.1:9")], header_timeout_s=0.3)
    parts = urlsplit(url)
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    writer.write(b"GET /health HTTP/1.1\r\nhost: r\r\n\r\n")
    await writer.drain()
    first = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 20)
    writer.write(HEAD)  # and nothing more
    await writer.drain()
    rest = await asyncio.wait_for(reader.read(), 20)  # EOF: the router closed the connection
    writer.close()
    assert first.startswith(b"HTTP/1.1 200 ")
    assert not rest.startswith(b"HTTP/1.1 200 ")
