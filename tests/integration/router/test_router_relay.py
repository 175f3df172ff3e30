"""Relay edge cases against real sockets: what counts as "nothing reached the client yet"."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest

from infctl.router.snapshot import Backend
from infctl.telemetry.prometheus import parse_metrics, value

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
HEAD_ONLY = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
CHUNK = b'18\r\ndata: {"choices": [1]}\n\n\r\n'
STREAM_BODY = b'{"model": "m", "prompt": "a b c", "max_tokens": 3, "stream": true}'
StartRouter = Callable[[list[Backend]], Awaitable[str]]


@pytest.fixture(params=["lean", "aiohttp"])
def router(request: pytest.FixtureRequest, start_router: Callable[..., Awaitable[str]]) -> StartRouter:
    """``url = await router(backends)``: a round-robin router on each upstream client in turn."""

    async def start(backends: list[Backend]) -> str:
        return await start_router(backends, policy="round_robin", upstream_client=request.param)

    return start


OnPost = Callable[[asyncio.StreamReader, asyncio.StreamWriter, int], Awaitable[bool]]


async def raw_server(on_post: OnPost) -> tuple[asyncio.Server, str]:
    """An engine written byte by byte: GETs (probes, scrapes) get an empty 200; each POST goes to
    ``on_post(reader, writer, n)`` (n: POSTs so far on this connection), which says whether to go on."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        posts = 0
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            lines = head.lower().split(b"\r\n")
            length = next((int(x.split(b":")[1]) for x in lines if x.startswith(b"content-length")), 0)
            await reader.readexactly(length)
            if head.startswith(b"GET"):
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
                continue
            posts += 1
            if not await on_post(reader, writer, posts):
                return

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"


@pytest.fixture
async def head_then_death() -> AsyncIterator[str]:
    """An engine that passes its health probes but answers every POST with a 200 head and then drops the
    connection (failing probes would let the router eject it before any request reached it)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            if head.startswith(b"GET"):
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
                continue
            writer.write(HEAD_ONLY)
            await writer.drain()
            writer.transport.abort()
            return

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.close()


async def test_engine_dying_after_its_head_but_before_a_token_is_retried_elsewhere(
    head_then_death: str, start_sim: Callable[..., Awaitable[Any]], router: StartRouter
) -> None:
    sim = await start_sim()
    backends = [Backend(id="dies", url=head_then_death), Backend(id="ok", url=sim.urls[0])]
    url = await router(backends)
    body = {"model": MODEL, "prompt": "a b c", "max_tokens": 3, "stream": True}
    async with httpx.AsyncClient(timeout=10) as c:
        answers = [await c.post(f"{url}/v1/completions", json=body) for _ in range(4)]
        metrics = parse_metrics((await c.get(f"{url}/metrics")).text)
    assert [a.status_code for a in answers] == [200] * 4
    assert all(a.text.rstrip().endswith("data: [DONE]") for a in answers)
    assert value(metrics, "infctl_router_retries_total") >= 1


async def test_client_disconnect_drops_the_upstream_request(router: StartRouter) -> None:
    """The engine must see its connection go when the client goes: that is how it frees the KV blocks."""
    dropped = asyncio.Event()

    async def engine(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int) -> bool:
        writer.write(HEAD_ONLY + CHUNK)  # one token, then a long think
        await writer.drain()
        if await reader.read(1) == b"":  # the router closed its side
            dropped.set()
        return False

    server, engine_url = await raw_server(engine)
    url = await router([Backend(id="e", url=engine_url)])
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(
        b"POST /v1/completions HTTP/1.1\r\nhost: r\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\n\r\n%s" % (len(STREAM_BODY), STREAM_BODY)
    )
    async with asyncio.timeout(30):  # guards against hanging, not measurements
        got = b""
        while b"choices" not in got:
            got += await reader.read(4096)
        writer.transport.abort()
        await dropped.wait()
    server.close()


async def test_a_stale_pooled_connection_is_retried_on_a_fresh_one(
    start_router: Callable[..., Awaitable[str]],
) -> None:
    """An engine that closes an idle keep-alive connection just as the next request is sent: the lean
    client tries once more on a new connection to the same engine, and nobody is blamed."""

    async def engine(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> bool:
        if n > 1:  # the next request on this connection: closed unanswered
            writer.transport.abort()
            return False
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}")
        return True

    server, engine_url = await raw_server(engine)
    url = await start_router([Backend(id="e", url=engine_url)], policy="round_robin")
    body = {"model": MODEL, "prompt": "a b c", "max_tokens": 3}
    async with httpx.AsyncClient(timeout=10) as c:
        answers = [await c.post(f"{url}/v1/completions", json=body) for _ in range(3)]
        metrics = parse_metrics((await c.get(f"{url}/metrics")).text)
    assert [(a.status_code, a.text) for a in answers] == [(200, "{}")] * 3
    assert value(metrics, "infctl_router_retries_total") == 0
    assert value(metrics, "infctl_router_ejections_total") == 0
    server.close()


async def test_a_stream_cut_after_content_ends_with_an_error_event(
    start_router: Callable[..., Awaitable[str]],
) -> None:
    """Never a clean end for a stream the engine broke: with no other engine to continue it on, the client
    reads an error event and ``[DONE]`` after what it had (``test_router_stream_resume`` has the rest)."""

    async def engine(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int) -> bool:
        writer.write(HEAD_ONLY + CHUNK)
        await writer.drain()
        await asyncio.sleep(0.02)
        writer.transport.abort()
        return False

    server, engine_url = await raw_server(engine)
    url = await start_router([Backend(id="e", url=engine_url)], policy="round_robin")
    async with (
        httpx.AsyncClient(timeout=10) as c,
        c.stream("POST", f"{url}/v1/completions", content=STREAM_BODY) as r,
    ):
        events = [line async for line in r.aiter_lines() if line]
    assert events[0] == 'data: {"choices": [1]}'
    error = json.loads(events[1].removeprefix("data: "))["error"]
    assert error["message"].startswith("the stream broke after 0 tokens") and error["code"] == 502
    assert events[2:] == ["data: [DONE]"]
    server.close()


async def test_an_http_1_0_client_gets_a_plain_body(
    start_sim: Callable[..., Awaitable[Any]], start_router: Callable[..., Awaitable[str]]
) -> None:
    """No chunked framing for a client that cannot read it (the fallback path de-chunks)."""
    sim = await start_sim()
    url = await start_router([Backend(id="s", url=sim.urls[0])], policy="round_robin")
    host, port = url.removeprefix("http://").split(":")
    body = b'{"model": "%s", "prompt": "a b c", "max_tokens": 3, "stream": true}' % MODEL.encode()
    reader, writer = await asyncio.open_connection(host, int(port))
    # A JSON content type: vLLM answers a body without one 400 (and so does the simulated vLLM).
    head = b"POST /v1/completions HTTP/1.0\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
    writer.write(head % len(body) + body)
    async with asyncio.timeout(30):
        answer = await reader.read()  # HTTP/1.0: the body ends when the connection does
    writer.close()
    head, _, payload = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 200") and b"chunked" not in head.lower()
    assert payload.startswith(b"data: ") and payload.rstrip().endswith(b"data: [DONE]")
