"""The lean upstream client against a real local aiohttp server: framing, reuse, and every way to fail."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from aiohttp import web

from infctl.router.http1 import (
    Http1Connection,
    Http1Pool,
    Http1Settings,
    ProtocolError,
    ResponseHead,
)
from infctl.router.http1_parse import parse_head, parse_head_cached

CHUNKS = [b"data: one\n\n", b"data: two\n\n", b"data: [DONE]\n\n"]


@dataclass
class Recorder:
    """A sink that keeps what it was given and resolves ``over`` when the exchange ends."""

    over: asyncio.Future[None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    heads: list[ResponseHead] = field(default_factory=list)
    raw: bytes = b""
    ended: bool = False
    error: Exception | None = None
    answered: bool = False
    accept: bool = True

    def head(self, head: ResponseHead) -> bool:
        self.heads.append(head)
        if not self.accept and not self.over.done():
            self.over.set_result(None)
        return self.accept

    def body(self, raw: bytes) -> None:
        self.raw += raw

    def end(self) -> None:
        self.ended = True
        self.over.set_result(None)

    def fail(self, exc: Exception, *, answered: bool) -> None:
        self.error, self.answered = exc, answered
        self.over.set_result(None)


def dechunk(raw: bytes) -> bytes:
    out, rest = b"", raw
    while True:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            assert rest == b"\r\n"
            return out
        out, rest = out + rest[:size], rest[size + 2 :]


async def stream(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
    await resp.prepare(request)
    for c in CHUNKS:
        await resp.write(c)
        await asyncio.sleep(0.005)
    await resp.write_eof()
    return resp


async def die_mid_stream(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse()
    await resp.prepare(request)
    await resp.write(CHUNKS[0])
    await asyncio.sleep(0.01)
    assert request.transport is not None
    request.transport.abort()
    return resp


async def die_before_head(request: web.Request) -> web.StreamResponse:
    assert request.transport is not None
    request.transport.abort()
    await asyncio.sleep(0.05)
    return web.Response()


async def stall_after_head(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse()
    await resp.prepare(request)
    await asyncio.sleep(5)
    return resp


@pytest.fixture
async def server() -> AsyncIterator[tuple[int, list[object]]]:
    """(port, peer addresses seen): a real aiohttp server with one route per behaviour."""
    peers: list[object] = []

    async def fixed(request: web.Request) -> web.Response:
        peers.append(request.transport.get_extra_info("peername") if request.transport else None)
        await request.read()
        return web.json_response({"echo": request.path})

    app = web.Application()
    app.router.add_post("/stream", stream)
    app.router.add_post("/length", fixed)
    app.router.add_post("/empty", empty)
    app.router.add_post("/boom", boom)
    app.router.add_post("/die-mid-stream", die_mid_stream)
    app.router.add_post("/die-before-head", die_before_head)
    app.router.add_post("/stall", stall_after_head)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield port, peers
    finally:
        await runner.cleanup()


async def empty(_: web.Request) -> web.Response:
    return web.Response(status=204)


async def boom(_: web.Request) -> web.Response:
    return web.Response(status=503, text="overloaded")


async def exchange(
    pool: Http1Pool, port: int, path: str, *, accept: bool = True, read_timeout_s: float = 5.0
) -> tuple[Http1Connection, Recorder]:
    conn = await pool.acquire("127.0.0.1", port)
    sink = Recorder(accept=accept)
    body = b'{"x": 1}'
    conn.send(
        f"POST {path} HTTP/1.1\r\nhost: t\r\ncontent-length: {len(body)}\r\n\r\n".encode() + body,
        sink,
        read_timeout_s,
    )
    async with asyncio.timeout(10):  # a guard against hanging, not a measurement
        await sink.over
    return conn, sink


async def test_chunked_body_passes_through_with_its_framing(server: tuple[int, list[object]]) -> None:
    pool = Http1Pool()
    _, sink = await exchange(pool, server[0], "/stream")
    assert sink.ended and sink.error is None
    assert sink.heads[0].status == 200 and sink.heads[0].chunked
    assert sink.heads[0].headers["content-type"] == "text/event-stream"
    assert sink.raw.endswith(b"0\r\n\r\n")
    assert dechunk(sink.raw) == b"".join(CHUNKS)
    pool.close()


async def test_content_length_body_and_keep_alive_reuse(server: tuple[int, list[object]]) -> None:
    port, peers = server
    pool = Http1Pool()
    first, a = await exchange(pool, port, "/length")
    assert pool.idle_count("127.0.0.1", port) == 1
    second, b = await exchange(pool, port, "/length")
    assert second is first and second.reused
    assert a.raw == b.raw == b'{"echo": "/length"}'
    assert a.heads[0].length == len(a.raw) and not a.heads[0].chunked
    assert len(peers) == 2 and peers[0] == peers[1]  # one TCP connection served both
    pool.close()


async def test_empty_body_ends_without_body_bytes(server: tuple[int, list[object]]) -> None:
    pool = Http1Pool()
    _, sink = await exchange(pool, server[0], "/empty")
    assert sink.heads[0].status == 204 and sink.ended and sink.raw == b""
    assert pool.idle_count("127.0.0.1", server[0]) == 1
    pool.close()


async def test_refused_head_closes_the_connection(server: tuple[int, list[object]]) -> None:
    pool = Http1Pool()
    conn, sink = await exchange(pool, server[0], "/boom", accept=False)
    assert sink.heads[0].status == 503 and not sink.ended and sink.raw == b""
    await asyncio.sleep(0.05)
    assert conn.transport is None and pool.idle_count("127.0.0.1", server[0]) == 0
    pool.close()


async def test_server_closing_mid_stream_fails_after_content(server: tuple[int, list[object]]) -> None:
    pool = Http1Pool()
    _, sink = await exchange(pool, server[0], "/die-mid-stream")
    assert sink.error is not None and sink.answered and not sink.ended
    assert CHUNKS[0] in sink.raw
    assert pool.idle_count("127.0.0.1", server[0]) == 0
    pool.close()


async def test_error_before_the_head_fails_unanswered(server: tuple[int, list[object]]) -> None:
    pool = Http1Pool()
    _, sink = await exchange(pool, server[0], "/die-before-head")
    assert isinstance(sink.error, ConnectionError) and not sink.answered and not sink.heads
    pool.close()


async def test_silence_longer_than_the_read_timeout_fails(server: tuple[int, list[object]]) -> None:
    pool = Http1Pool()
    _, sink = await exchange(pool, server[0], "/stall", read_timeout_s=0.1)
    assert isinstance(sink.error, TimeoutError) and sink.answered
    pool.close()


async def test_a_short_read_timeout_fires_on_time_beside_a_long_one(server: tuple[int, list[object]]) -> None:
    """One sweep checks every exchange's silence: an exchange with a long timeout, started first, must not
    make a later short one wait for its own pace (the guard in ``exchange`` is 10 s)."""
    pool = Http1Pool()
    long_conn = await pool.acquire("127.0.0.1", server[0])
    long_sink = Recorder()
    request = b"POST /stall HTTP/1.1\r\nhost: t\r\ncontent-length: 0\r\n\r\n"
    long_conn.send(request, long_sink, 600.0)
    _, sink = await exchange(pool, server[0], "/stall", read_timeout_s=0.1)
    assert isinstance(sink.error, TimeoutError)
    assert not long_sink.over.done()  # still within its own timeout
    long_conn.abort()
    pool.close()


async def test_refused_connect_raises() -> None:
    pool = Http1Pool(Http1Settings(connect_timeout_s=1.0))
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    with pytest.raises(OSError):
        await pool.acquire("127.0.0.1", port)


class FakeTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        pass

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def is_reading(self) -> bool:
        return True

    def resume_reading(self) -> None:
        pass


RESPONSE = (
    b"HTTP/1.1 100 Continue\r\n\r\n"
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-Extra: 1\r\n\r\n"
    b"5;ext=1\r\nhello\r\nB\r\n, wide worl\r\n1\r\nd\r\n0\r\nTrailer: x\r\n\r\n"
)


@pytest.mark.parametrize("step", [1, 2, 3, 7, 64, len(RESPONSE)])
async def test_any_split_of_the_bytes_gives_the_same_answer(step: int) -> None:
    """Reads split anywhere (inside the head, a size line, a chunk, the trailer) change nothing."""
    pool = Http1Pool()
    conn = Http1Connection(pool, ("h", 1))
    conn.connection_made(FakeTransport())
    sink = Recorder()
    conn.send(b"POST / HTTP/1.1\r\n\r\n", sink, 5.0)
    for i in range(0, len(RESPONSE), step):
        conn.data_received(RESPONSE[i : i + step])
    assert sink.ended and [h.status for h in sink.heads] == [200]
    assert sink.raw == RESPONSE[RESPONSE.index(b"5;ext") :]
    assert pool.idle_count("h", 1) == 1  # complete and in step: back in the pool
    pool.close()


async def test_framing_before_content_is_held_back() -> None:
    """A head and a chunk-size line without content, then death: the sink has been given nothing."""
    pool = Http1Pool()
    conn = Http1Connection(pool, ("h", 1))
    conn.connection_made(FakeTransport())
    sink = Recorder()
    conn.send(b"POST / HTTP/1.1\r\n\r\n", sink, 5.0)
    conn.data_received(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n7f\r\n")
    conn.connection_lost(None)
    assert sink.raw == b"" and sink.error is not None and sink.answered


async def test_a_chunk_reaches_the_sink_only_once_it_is_whole() -> None:
    """An event split over reads waits for its end; a death mid-chunk leaves the sink with whole chunks only
    (so a router can append an error event or a continuation to the client's stream)."""
    pool = Http1Pool()
    conn = Http1Connection(pool, ("h", 1))
    conn.connection_made(FakeTransport())
    sink = Recorder()
    conn.send(b"POST / HTTP/1.1\r\n\r\n", sink, 5.0)
    first, second = b"6\r\ndata 1\r\n", b"6\r\ndata 2\r\n"
    conn.data_received(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n" + first + second[:4])
    assert sink.raw == first
    conn.data_received(second[4:9])
    assert sink.raw == first
    conn.data_received(second[9:] + b"6\r\nda")
    assert sink.raw == first + second
    conn.connection_lost(ConnectionResetError())
    assert sink.raw == first + second and sink.error is not None


@pytest.mark.parametrize(
    "garbage",
    [
        b"SPDY/3 200 OK\r\n\r\n",
        b"HTTP/1.1 2x0 OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
    ],
)
async def test_unreadable_answers_fail_the_exchange(garbage: bytes) -> None:
    pool = Http1Pool()
    conn = Http1Connection(pool, ("h", 1))
    transport = FakeTransport()
    conn.connection_made(transport)
    sink = Recorder()
    conn.send(b"POST / HTTP/1.1\r\n\r\n", sink, 5.0)
    conn.data_received(garbage)
    assert isinstance(sink.error, ProtocolError) and transport.closed


async def test_bytes_beyond_the_answer_retire_the_connection() -> None:
    pool = Http1Pool()
    conn = Http1Connection(pool, ("h", 1))
    transport = FakeTransport()
    conn.connection_made(transport)
    sink = Recorder()
    conn.send(b"POST / HTTP/1.1\r\n\r\n", sink, 5.0)
    conn.data_received(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nokEXTRA")
    assert sink.ended and sink.raw == b"ok"
    assert transport.closed and pool.idle_count("h", 1) == 0


def test_a_repeated_response_head_is_parsed_once_and_still_parsed_right() -> None:
    sse = b"HTTP/1.1 200 OK\r\ndate: Mon, 30 Nov 2026 08:00:00 GMT\r\ntransfer-encoding: chunked"
    other = b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nretry-after: 2"
    assert parse_head_cached(sse) is parse_head_cached(sse)
    for raw in (sse, other):
        assert parse_head_cached(raw) == parse_head(raw)
    assert (parse_head_cached(other).status, parse_head_cached(other).length) == (503, 0)
