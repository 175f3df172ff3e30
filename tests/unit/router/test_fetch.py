"""Whole-answer exchanges over the lean client, against a real local aiohttp server: the PD prefill leg's and
the mirror's POST, and the httpx transport the router scrapes and probes through."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator

import httpx
import pytest
from aiohttp import web

from infctl.router.fetch import FetchError, LeanTransport, dechunk, fetch, post_whole
from infctl.router.http1 import Http1Pool, Http1Settings, ProtocolError
from infctl.router.upstream import UpstreamFailed
from infctl.telemetry import make_client

METRICS = 'vllm:num_requests_waiting{engine="0"} 3.0\n'


@pytest.fixture
async def engine() -> AsyncIterator[tuple[str, list[web.Request]]]:
    """``(base_url, requests seen)``: chunked and length-delimited answers, a 503, a stall."""
    seen: list[web.Request] = []

    async def echo(request: web.Request) -> web.StreamResponse:
        seen.append(request)
        body = await request.read()
        if request.query.get("chunked"):
            resp = web.StreamResponse(headers={"content-type": "application/json"})
            await resp.prepare(request)
            for i in range(0, len(body), 3):
                await resp.write(body[i : i + 3])
            await resp.write_eof()
            return resp
        return web.Response(body=body, content_type="application/json")

    async def metrics(request: web.Request) -> web.Response:
        seen.append(request)
        return web.Response(text=METRICS)

    async def boom(_: web.Request) -> web.Response:
        return web.Response(status=503, text="overloaded")

    async def stall(_: web.Request) -> web.Response:
        await asyncio.sleep(5)
        return web.Response()

    app = web.Application()
    app.router.add_post("/echo", echo)
    app.router.add_get("/metrics", metrics)
    app.router.add_post("/boom", boom)
    app.router.add_get("/stall", stall)
    runner = web.AppRunner(app, handler_cancellation=True)  # a client gone ends its handler
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}", seen
    finally:
        await runner.cleanup()


async def closed_port() -> int:
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port: int = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    return port


@pytest.mark.parametrize("query", ["", "?chunked=1"])
async def test_post_whole_returns_the_whole_answer_and_keeps_the_connection(
    engine: tuple[str, list[web.Request]], query: str
) -> None:
    url, seen = engine
    pool = Http1Pool()
    body = b'{"prompt": "a b c", "kv_transfer_params": {"do_remote_decode": true}}'
    for _ in range(2):
        status, data = await post_whole(pool, url + "/echo" + query, body, {"x-request-id": "r1"})
        assert (status, data) == (200, body)
    assert [r.headers["x-request-id"] for r in seen] == ["r1", "r1"]
    assert pool.idle_count("127.0.0.1", int(url.rsplit(":", 1)[1])) == 1  # one connection, reused
    pool.close()


async def test_post_whole_5xx_and_refused_connect_are_upstream_failures(
    engine: tuple[str, list[web.Request]],
) -> None:
    url, _ = engine
    pool = Http1Pool()
    with pytest.raises(UpstreamFailed) as busy:
        await post_whole(pool, url + "/boom", b"{}", {})
    assert busy.value.status == 503 and not busy.value.fatal
    with pytest.raises(UpstreamFailed) as gone:
        await post_whole(pool, f"http://127.0.0.1:{await closed_port()}/x", b"{}", {})
    assert gone.value.fatal  # the backend is not there: eject it now
    pool.close()


async def test_fetch_times_out_on_silence(engine: tuple[str, list[web.Request]]) -> None:
    url, _ = engine
    pool = Http1Pool()
    with pytest.raises(FetchError) as err:
        await fetch(pool, "GET", url + "/stall", read_timeout_s=0.05)
    assert err.value.stage == "timeout"
    pool.close()


async def test_a_pooled_connection_the_server_closed_is_retried_on_a_fresh_one(
    engine: tuple[str, list[web.Request]],
) -> None:
    url, _ = engine
    pool = Http1Pool()
    assert (await fetch(pool, "GET", url + "/metrics")).body == METRICS.encode()
    conn = await pool.acquire("127.0.0.1", int(url.rsplit(":", 1)[1]))
    assert conn.reused and conn.transport is not None
    conn.transport.get_extra_info("socket").shutdown(socket.SHUT_WR)  # a send on it now fails unanswered
    pool.release(conn)
    assert (await fetch(pool, "GET", url + "/metrics")).status == 200
    pool.close()


def test_dechunk() -> None:
    assert dechunk(b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nTrailer: x\r\n\r\n") == b"hello world"
    assert dechunk(b"0\r\n\r\n") == b""
    with pytest.raises(ProtocolError):
        dechunk(b"zz\r\nhello\r\n0\r\n\r\n")
    with pytest.raises(ProtocolError):
        dechunk(b"5\r\nhello\r\n")


async def test_httpx_client_over_the_lean_transport(engine: tuple[str, list[web.Request]]) -> None:
    url, seen = engine
    pool = Http1Pool()
    async with make_client(LeanTransport(pool)) as client:
        r = await client.get(url + "/metrics")
        assert r.status_code == 200 and r.text == METRICS
        assert "accept-encoding" not in seen[-1].headers  # answers come back as sent, never compressed
        r = await client.post(url + "/echo?chunked=1", content=b'{"a": 1}')
        assert r.json() == {"a": 1}
        with pytest.raises(httpx.ReadTimeout):
            await client.get(url + "/stall", timeout=0.05)
        with pytest.raises(httpx.ConnectError):
            await client.get(f"http://127.0.0.1:{await closed_port()}/metrics")
    pool.close()


async def test_https_goes_to_the_fallback_transport() -> None:
    fallback = httpx.MockTransport(lambda request: httpx.Response(200, text=str(request.url)))
    async with make_client(LeanTransport(Http1Pool(Http1Settings()), fallback)) as client:
        r = await client.get("https://engine.internal/metrics")
    assert r.text == "https://engine.internal/metrics"
