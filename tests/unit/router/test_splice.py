"""The lean front's splice to aiohttp, over real sockets: a TCP listener whose protocol hands every
connection (and the bytes it has read) to ``Splicer.take``, in front of an aiohttp app on the private Unix
socket. Bytes go both ways unchanged, either side closing closes the other, and the socket's directory is
private and removed."""

from __future__ import annotations

import asyncio
import os
import stat
import tempfile
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from infctl.router.splice import Splicer


class HandOver(asyncio.Protocol):
    """Reads the first bytes of a connection, then hands it to the splicer (as the lean front does)."""

    def __init__(self, splicer: Splicer) -> None:
        self.splicer = splicer
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        self.splicer.take(self.transport, data)


@pytest.fixture
async def spliced() -> AsyncIterator[tuple[tuple[str, int], Splicer, dict[str, Any]]]:
    seen: dict[str, Any] = {"cancelled": asyncio.Event(), "started": asyncio.Event()}

    async def echo(request: web.Request) -> web.Response:
        return web.Response(body=await request.read(), headers={"x-path": request.path})

    async def closing(request: web.Request) -> web.Response:
        resp = web.Response(text="bye")
        resp.force_close()
        return resp

    async def forever(request: web.Request) -> web.Response:
        seen["started"].set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            seen["cancelled"].set()
            raise
        raise AssertionError("unreachable")

    app = web.Application()
    app.router.add_post("/echo", echo)
    app.router.add_get("/close", closing)
    app.router.add_get("/forever", forever)
    runner = web.AppRunner(app, handler_cancellation=True)
    await runner.setup()
    splicer = await Splicer.serve(runner)
    server = await asyncio.get_running_loop().create_server(lambda: HandOver(splicer), "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[:2], splicer, seen
    finally:
        server.close()
        splicer.abort_all()
        await runner.cleanup()
        splicer.remove()


async def read_answer(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    return head, await reader.readexactly(length)


async def test_requests_and_answers_pass_unchanged_on_a_kept_connection(
    spliced: tuple[tuple[str, int], Splicer, dict[str, Any]],
) -> None:
    (host, port), splicer, _ = spliced
    reader, writer = await asyncio.open_connection(host, port)
    try:
        big = b"z" * 300_000  # more than one read and one write buffer's worth, both ways
        for body in (b"hello", big):
            writer.write(
                b"POST /echo HTTP/1.1\r\nhost: r\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
            )
            head, got = await asyncio.wait_for(read_answer(reader), 10)
            assert head.startswith(b"HTTP/1.1 200 ") and b"x-path: /echo" in head.lower() and got == body
        assert len(splicer.connections) == 1
    finally:
        writer.close()


async def test_aiohttp_closing_closes_the_client_and_the_client_leaving_cancels_the_handler(
    spliced: tuple[tuple[str, int], Splicer, dict[str, Any]],
) -> None:
    (host, port), splicer, seen = spliced
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(b"GET /close HTTP/1.1\r\nhost: r\r\n\r\n")
    answer = await asyncio.wait_for(reader.read(), 10)  # to EOF: aiohttp's close reached the client
    assert answer.startswith(b"HTTP/1.1 200 ") and answer.endswith(b"bye")
    writer.close()

    reader, writer = await asyncio.open_connection(host, port)
    writer.write(b"GET /forever HTTP/1.1\r\nhost: r\r\n\r\n")
    await asyncio.wait_for(seen["started"].wait(), 10)
    writer.close()
    await asyncio.wait_for(seen["cancelled"].wait(), 10)
    for _ in range(100):
        if not splicer.connections:
            break
        await asyncio.sleep(0.01)
    assert not splicer.connections


async def test_the_socket_lives_in_a_private_directory_removed_at_the_end(
    spliced: tuple[tuple[str, int], Splicer, dict[str, Any]],
) -> None:
    _, splicer, _ = spliced
    directory = os.path.dirname(splicer.path)
    assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
    assert stat.S_ISSOCK(os.stat(splicer.path).st_mode)
    splicer.remove()
    assert not os.path.exists(directory)


async def test_a_tmpdir_too_long_for_a_unix_socket_falls_back_to_tmp(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    long_dir = tmp_path / ("d" * 100)
    long_dir.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(long_dir))
    runner = web.AppRunner(web.Application())
    await runner.setup()
    splicer = await Splicer.serve(runner)
    try:
        assert splicer.path.startswith("/tmp/infctl-router-") and os.path.exists(splicer.path)
    finally:
        await runner.cleanup()
        splicer.remove()
