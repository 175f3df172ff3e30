"""The lean relay under a slow client: paused upstream reads must not leak into the next exchange."""

from __future__ import annotations

import asyncio
from typing import Any

from infctl.router.http1 import Http1Pool, Http1Settings
from infctl.router.relay import forward_lean


class SlowClient:
    """A client transport whose send buffer reads ``buffered`` bytes (over the relay's high water: slow)."""

    def __init__(self, buffered: int = 0) -> None:
        self.buffered, self.out = buffered, b""

    def is_closing(self) -> bool:
        return False

    def write(self, data: bytes) -> None:
        self.out += data

    def get_write_buffer_size(self) -> int:
        return self.buffered


class Request:
    def __init__(self, transport: SlowClient) -> None:
        self.transport, self.keep_alive = transport, True


async def _engine(chunks: int, gap: float) -> tuple[asyncio.Server, int]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            data = b""
            while b"\r\n\r\n" not in data:
                got = await reader.read(65536)
                if not got:
                    return
                data += got
            writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n")
            for _ in range(chunks):
                await asyncio.sleep(gap)
                writer.write(b"5\r\nhello\r\n")
            await asyncio.sleep(gap)
            writer.write(b"0\r\n\r\n")
            await writer.drain()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


GUARD_S = 30.0
"""How long one exchange may take before the test fails: a guard against hanging, not a measurement."""


async def _send(pool: Http1Pool, port: int, client: SlowClient) -> Any:
    url = f"http://127.0.0.1:{port}/v1/completions"
    relayed = forward_lean(Request(client), pool, url, b"{}", {}, request_id="r")  # type: ignore[arg-type]
    return await asyncio.wait_for(relayed, GUARD_S)


async def test_a_connection_paused_for_a_slow_client_reads_again_when_reused() -> None:
    server, port = await _engine(chunks=0, gap=0.05)
    async with server:
        # A read timeout beyond the guard: a paused read leaking into the next exchange would hold it until
        # the guard fails the test, so completing at all shows it did not (no clock read on a loaded host).
        pool = Http1Pool(Http1Settings(read_timeout_s=2 * GUARD_S))
        slow = SlowClient()
        asyncio.get_running_loop().call_later(0.02, setattr, slow, "buffered", 300_000)
        _, first = await _send(pool, port, slow)  # its last chunk arrives while the client is slow
        assert first.completed
        _, second = await _send(pool, port, SlowClient())  # the same pooled connection
        assert second.completed


async def test_a_client_slower_than_the_read_timeout_still_gets_the_whole_stream() -> None:
    # The engine's gaps (20 ms) are far inside the read timeout (0.5 s), so only a timeout running while
    # the relay waits for the client (1 s) can cut the stream, even when a loaded host delays a gap.
    server, port = await _engine(chunks=10, gap=0.02)
    async with server:
        pool = Http1Pool(Http1Settings(read_timeout_s=0.5))
        slow = SlowClient(300_000)
        asyncio.get_running_loop().call_later(1.0, setattr, slow, "buffered", 0)  # stalls past the timeout
        _, result = await _send(pool, port, slow)
        assert result.completed and slow.out.count(b"hello") == 11
