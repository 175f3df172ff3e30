"""Whole-answer exchanges over the lean client, against a real local aiohttp server: the PD prefill leg's and
the mirror's POST, and the bare GET the router scrapes and probes through (``EngineGet``, over aiohttp's
client where the lean pool cannot go)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from aiohttp import web

from infctl.engines import get_adapter
from infctl.router.fetch import EngineGet, FetchError, SessionGet, dechunk, fetch, post_whole
from infctl.router.http1 import Http1Pool, ProtocolError
from infctl.router.ranks import Target, scrape_targets
from infctl.router.upstream import UpstreamFailed, make_session
from infctl.telemetry import make_client
from infctl.telemetry.scrape import HttpxGet, NoAnswer
from infctl.telemetry.signals import EngineSignals

METRICS = 'vllm:num_requests_waiting{engine="0"} 3.0\n'
CLIENT_GONE = web.RequestKey("client_gone", bool)
"""Set on the engine fixture's ``/stall`` request when its client went away."""
VLLM_DP2 = (Path(__file__).parents[1] / "engines" / "fixtures" / "vllm_v0_11.prom").read_bytes()
"""A real vLLM /metrics page of an engine with two data-parallel ranks (labelled ``engine``)."""


@pytest.fixture
async def engine() -> AsyncIterator[tuple[str, list[web.Request]]]:
    """``(base_url, requests seen)``: chunked and length-delimited answers, a 503, a stall (its request
    marked ``CLIENT_GONE`` when the client went away)."""
    seen: list[web.Request] = []

    async def answer(request: web.Request, body: bytes, kind: str, chunked: bool) -> web.StreamResponse:
        seen.append(request)
        if not chunked:
            return web.Response(body=body, content_type=kind)
        resp = web.StreamResponse(headers={"content-type": kind})
        await resp.prepare(request)
        step = max(3, len(body) // 100)
        for i in range(0, len(body), step):
            await resp.write(body[i : i + step])
        await resp.write_eof()
        return resp

    async def echo(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        return await answer(request, body, "application/json", bool(request.query.get("chunked")))

    async def metrics(request: web.Request) -> web.Response:
        seen.append(request)
        return web.Response(text=METRICS)

    async def vllm_metrics(request: web.Request) -> web.StreamResponse:
        return await answer(request, VLLM_DP2, "text/plain", request.path.startswith("/chunked"))

    async def boom(_: web.Request) -> web.Response:
        return web.Response(status=503, text="overloaded")

    async def stall(request: web.Request) -> web.Response:
        seen.append(request)
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            request[CLIENT_GONE] = True
            raise
        return web.Response()

    app = web.Application()
    app.router.add_post("/echo", echo)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/vllm/metrics", vllm_metrics)
    app.router.add_get("/chunked/metrics", vllm_metrics)
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


async def test_a_cancelled_fetch_drops_its_connection_so_the_engine_stops(
    engine: tuple[str, list[web.Request]],
) -> None:
    """Cancelling the caller (a PD leg whose batch failed, a client gone) must close the exchange's
    connection: an engine works on a request until its connection closes."""
    url, seen = engine
    pool = Http1Pool()
    task = asyncio.ensure_future(fetch(pool, "GET", url + "/stall"))
    while not seen:
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for _ in range(100):
        if seen[0].get(CLIENT_GONE):
            break
        await asyncio.sleep(0.02)
    assert seen[0].get(CLIENT_GONE)
    assert pool.idle_count("127.0.0.1", int(url.rsplit(":", 1)[1])) == 0
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


@pytest.mark.parametrize("page", ["/vllm", "/chunked"])
async def test_the_bare_get_scrapes_the_same_signals_as_httpx(
    engine: tuple[str, list[web.Request]], page: str
) -> None:
    """The router's scrape path (``EngineGet``) against httpx's client: the same page gives the same
    signals, each rank's own and the engine's."""
    url, seen = engine
    vllm = get_adapter("vllm")
    base = url + page
    targets = [Target(f"e#dp{r}", base, r, vllm) for r in (0, 1)] + [Target("e", base, None, vllm)]
    pool = Http1Pool()
    async with make_client() as plain:
        bare = await scrape_targets(EngineGet(pool, HttpxGet(plain), 2.0), targets)
        assert seen[-1].headers["accept"] == "text/plain"  # the text exposition, as httpx's client asks
        via_httpx = await scrape_targets(plain, targets)
    pool.close()
    assert bare == via_httpx
    loads = {bid: (s.queue, s.running) for bid, s in bare.items() if isinstance(s, EngineSignals)}
    assert loads == {"e#dp0": (3.0, 7.0), "e#dp1": (0.0, 5.0), "e": (3.0, 12.0)}  # each rank its own


async def test_the_bare_get_reports_no_answer_and_says_whether_the_engine_was_slow(
    engine: tuple[str, list[web.Request]],
) -> None:
    url, _ = engine
    pool = Http1Pool()
    async with make_client() as client:
        get = EngineGet(pool, HttpxGet(client), 2.0)
        assert await get(url + "/metrics") == (200, METRICS.encode())
        assert pool.idle_count("127.0.0.1", int(url.rsplit(":", 1)[1])) == 1  # the lean pool's connection
        with pytest.raises(NoAnswer) as slow:
            await get(url + "/stall", 0.05)
        assert slow.value.timed_out and "timed out" in str(slow.value)
        with pytest.raises(NoAnswer) as gone:
            await get(f"http://127.0.0.1:{await closed_port()}/health")
        assert not gone.value.timed_out and "ConnectionRefusedError" in str(gone.value)
    pool.close()


async def test_without_a_pool_or_over_https_the_bare_get_asks_the_other_getter() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.host == "slow":
            raise httpx.ConnectTimeout("connect timed out", request=request)
        return httpx.Response(200, text=str(request.url))

    pool = Http1Pool()
    async with make_client(httpx.MockTransport(answer)) as client:
        other = HttpxGet(client)
        assert await EngineGet(pool, other, 1.0)("https://e/metrics") == (200, b"https://e/metrics")
        assert await EngineGet(None, other, 1.0)("http://e/metrics") == (200, b"http://e/metrics")
        with pytest.raises(NoAnswer) as slow:
            await EngineGet(None, other, 1.0)("http://slow/health")
    assert slow.value.timed_out
    assert pool.idle_count("e", 80) == 0  # the pool was never asked
    pool.close()


async def test_the_session_get_is_a_getter_over_aiohttps_client(
    engine: tuple[str, list[web.Request]],
) -> None:
    """What the router scrapes HTTPS engines through (and everything on ``--upstream-client aiohttp``):
    the same answers and failures as the bare GET, over the router's aiohttp session."""
    url, seen = engine
    session = make_session(connect_timeout_s=1.0, read_timeout_s=5.0)
    try:
        get = EngineGet(None, SessionGet(session, 2.0), 2.0)
        assert await get(url + "/metrics") == (200, METRICS.encode())
        assert seen[-1].headers["accept"] == "text/plain"  # the text exposition, as the bare GET asks
        assert await get(url + "/chunked/metrics") == (200, VLLM_DP2)  # de-chunked
        with pytest.raises(NoAnswer) as slow:
            await get(url + "/stall", 0.05)
        assert slow.value.timed_out and "timed out" in str(slow.value)
        with pytest.raises(NoAnswer) as gone:
            await get(f"http://127.0.0.1:{await closed_port()}/health")
        assert not gone.value.timed_out
    finally:
        await session.close()
