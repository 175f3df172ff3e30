"""The lean front's protocol over a fake transport: partial reads, hand-over, keep-alive, pipelining, 413,
a client gone mid-request. ``generate`` is replaced by a recorder: the routing itself is tested live."""

from __future__ import annotations

import asyncio
from collections import Counter
from types import SimpleNamespace
from typing import Any

import pytest
from aiohttp import web

from infctl.router import front
from infctl.router.front import FrontProtocol, LeanListener
from infctl.router.pool import BackendPool
from infctl.router.relay import RelayedResponse
from infctl.router.snapshot import Backend

BODY = b'{"prompt": "a"}'
POST = b"POST /v1/completions HTTP/1.1\r\nhost: r\r\ncontent-length: %d\r\n\r\n%s" % (len(BODY), BODY)


class FakeTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.out = bytearray()
        self.closed = self.aborted = self.paused = False
        self.protocol: Any = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.out += data

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self.protocol = protocol

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default


class Fallback:
    """Stands in for the ``splice.Splicer``: records each connection handed to aiohttp and its bytes."""

    def __init__(self) -> None:
        self.made: list[Any] = []
        self.connections: list[Any] = []  # the Splicer's: the connections spliced to aiohttp

    def take(self, transport: asyncio.Transport, data: bytes) -> None:
        self.made.append(SimpleNamespace(transport=transport, data=bytearray(data)))

    def abort_all(self) -> None:
        self.connections.clear()


def make(
    monkeypatch: pytest.MonkeyPatch,
    answer: Any = None,
    *,
    max_body: int = 1 << 20,
    max_connections: int = 100,
) -> tuple[FrontProtocol, FakeTransport, Fallback, list[Any]]:
    seen: list[Any] = []

    async def generate(state: Any, request: Any, *, path: str) -> web.StreamResponse:
        seen.append((path, await request.read(), dict(request.headers)))
        if answer is not None:
            out: web.StreamResponse = await answer(request)
            return out
        return web.json_response({"ok": len(seen)})

    monkeypatch.setattr(front, "generate", generate)
    pool = BackendPool([Backend("b", url="http://e:1")])
    state: Any = SimpleNamespace(
        cfg=SimpleNamespace(
            max_body_bytes=max_body,
            header_timeout_s=10.0,
            body_timeout_s=30.0,
            keepalive_timeout_s=75.0,
            max_connections=max_connections,
        ),
        http1=object(),
        pool=pool,
        metrics=SimpleNamespace(rejected=Counter()),
        draining=False,
        handing_over=False,
    )
    fallback = Fallback()
    listener = LeanListener(state, fallback)  # type: ignore[arg-type]
    proto = FrontProtocol(state, fallback, listener)  # type: ignore[arg-type]
    tr = FakeTransport()
    proto.connection_made(tr)
    return proto, tr, fallback, seen


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def held_answer() -> tuple[asyncio.Event, Any]:
    """A stand-in for ``generate``'s answer that waits until the event is set."""
    release = asyncio.Event()

    async def held(request: Any) -> web.StreamResponse:
        await release.wait()
        return web.json_response({})

    return release, held


async def test_a_request_fed_one_byte_at_a_time_is_served_once(monkeypatch: pytest.MonkeyPatch) -> None:
    proto, tr, _, seen = make(monkeypatch)
    for i in range(len(POST)):
        proto.data_received(POST[i : i + 1])
    await settle()
    assert seen == [("/v1/completions", BODY, {"host": "r", "content-length": str(len(BODY))})]
    assert tr.out.startswith(b"HTTP/1.1 200 OK\r\n") and tr.out.endswith(b'{"ok": 1}')
    assert b"content-length: 9\r\n" in tr.out and not tr.closed  # keep-alive


async def test_pipelined_requests_are_answered_in_order_and_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    proto, tr, _, seen = make(monkeypatch)
    proto.data_received(POST + POST + POST[:10])
    await settle()
    assert len(seen) == 2 and tr.out.count(b"HTTP/1.1 200 OK") == 2
    assert tr.out.index(b'{"ok": 1}') < tr.out.index(b'{"ok": 2}')
    proto.data_received(POST[10:])
    await settle()
    assert len(seen) == 3 and not tr.closed


async def test_a_complete_request_is_routed_in_the_callback_that_completed_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Nothing queued on the loop (other requests, a scrape) runs between a request's last byte and its
    routing: here the handler never waits, so the answer is out before ``data_received`` returns."""
    proto, tr, _, seen = make(monkeypatch)
    proto.data_received(POST[:-1])
    assert not seen
    proto.data_received(POST[-1:])
    assert len(seen) == 1 and tr.out.startswith(b"HTTP/1.1 200 OK\r\n") and proto.task is None


async def test_a_request_that_waits_continues_in_a_task_and_the_next_one_follows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    release, held = held_answer()
    proto, tr, _, seen = make(monkeypatch, held)
    proto.data_received(POST + POST)
    assert len(seen) == 1 and proto.task is not None and not tr.out  # routed at once, then waiting
    release.set()
    await settle()
    assert len(seen) == 2 and tr.out.count(b"HTTP/1.1 200 OK") == 2 and proto.task is None


async def test_many_pipelined_requests_answered_without_waiting_do_not_nest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each one that never waits lets ``_next``'s loop take the next: no recursion however many queue."""
    proto, tr, _, seen = make(monkeypatch)
    proto.data_received(POST * 3000)
    assert len(seen) == 3000 and tr.out.count(b"HTTP/1.1 200 OK") == 3000 and not proto.buf
    assert tr.out.rindex(b'{"ok": 2999}') < tr.out.rindex(b'{"ok": 3000}')


async def test_other_requests_are_handed_to_aiohttp_with_every_buffered_byte(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    proto, tr, fallback, seen = make(monkeypatch)
    get = b"GET /metrics HTTP/1.1\r\nhost: r\r\n\r\n"
    proto.data_received(POST)
    await settle()
    proto.data_received(get + POST[:5])
    assert seen and len(fallback.made) == 1
    handed = fallback.made[0]
    assert handed.transport is tr
    assert bytes(handed.data) == get + POST[:5]  # from the first byte of the request the front did not take
    assert proto not in proto.listener.connections


async def test_chunked_generation_request_goes_to_aiohttp(monkeypatch: pytest.MonkeyPatch) -> None:
    proto, _, fallback, seen = make(monkeypatch)
    raw = b"POST /v1/completions HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
    proto.data_received(raw)
    await settle()
    assert not seen and bytes(fallback.made[0].data) == raw


async def test_a_body_over_the_limit_is_413_in_the_openai_shape_and_closed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    proto, tr, _, seen = make(monkeypatch, max_body=4)
    proto.data_received(POST)
    await settle()
    assert not seen and tr.closed
    assert tr.out.startswith(b"HTTP/1.1 413 ") and b'"type": "BadRequestError"' in tr.out
    assert b"connection: close" in tr.out


async def test_connection_close_is_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    proto, tr, _, _ = make(monkeypatch)
    proto.data_received(POST.replace(b"host: r", b"connection: close"))
    await settle()
    assert b"connection: close\r\n" in tr.out and tr.closed


async def test_generation_is_handed_to_aiohttp_once_a_backend_turns_https(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The front's plain-HTTP check is kept between requests, but not across a change of the backends."""
    proto, _, fallback, seen = make(monkeypatch)
    proto.data_received(POST)
    await settle()
    assert len(seen) == 1 and not fallback.made
    proto.state.pool.add(Backend("b", url="https://e:1"))  # redefined in place (the admin API, discovery)
    proto.data_received(POST)
    assert len(seen) == 1 and fallback.made and bytes(fallback.made[0].data) == POST


async def test_client_gone_mid_request_cancels_the_handler(monkeypatch: pytest.MonkeyPatch) -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def forever(request: Any) -> web.StreamResponse:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        raise AssertionError("unreachable")

    proto, tr, _, _ = make(monkeypatch, forever)
    proto.data_received(POST)
    await started.wait()
    proto.connection_lost(ConnectionResetError())
    await asyncio.wait_for(cancelled.wait(), 5)
    assert not tr.out


async def test_bytes_behind_a_busy_request_pause_reading_until_it_is_answered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    release = asyncio.Event()

    async def held(request: Any) -> web.StreamResponse:
        await release.wait()
        return RelayedResponse(200, keep_alive=True)  # the relay wrote the answer itself

    proto, tr, _, seen = make(monkeypatch, held)
    proto.data_received(POST)
    await settle()
    big = b"x" * (front._PAUSE_ABOVE + 1)
    proto.data_received(b"POST /v1/completions HTTP/1.1\r\ncontent-length: %d\r\n\r\n%s" % (len(big), big))
    assert tr.paused and len(seen) == 1
    release.set()
    await settle()
    assert (tr.paused, len(seen)) == (False, 2)  # the pipelined one was read and served
    assert bytes(tr.out) == b""  # nothing written by the front over a relayed answer


async def test_an_unhandled_error_is_a_500_in_the_openai_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    async def boom(request: Any) -> web.StreamResponse:
        raise RuntimeError("bug")

    proto, tr, _, _ = make(monkeypatch, boom)
    proto.data_received(POST)
    await settle()
    assert tr.out.startswith(b"HTTP/1.1 500 ") and b"InternalServerError" in tr.out and not tr.closed


async def test_idle_keep_alive_connections_are_closed_after_the_timeout_busy_ones_are_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    proto, tr, _, _ = make(monkeypatch)
    proto.data_received(POST)
    await settle()
    listener = proto.listener
    listener.close_idle(proto.idle_since)  # idle, but not since before that instant
    assert not tr.closed
    proto.data_received(POST[:10])  # a request on its way is not idle
    listener.close_idle(proto.idle_since + 1)
    assert not tr.closed
    proto.buf.clear()
    proto.read_by = None  # that request gone (its head deadline would otherwise close it first)
    listener.sweep(proto.idle_since + proto.state.cfg.keepalive_timeout_s - 0.1)
    assert not tr.closed
    listener.sweep(proto.idle_since + proto.state.cfg.keepalive_timeout_s + 0.1)
    assert tr.closed


async def test_an_idle_connection_outlives_the_header_timeout_and_serves_its_next_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    proto, tr, _, seen = make(monkeypatch)
    proto.data_received(POST)
    await settle()
    cfg = proto.state.cfg
    proto.listener.sweep(proto.idle_since + cfg.header_timeout_s + 5)  # a client pool keeps it idle 15 s
    assert not tr.is_closing()
    proto.data_received(POST)
    await settle()
    assert len(seen) == 2 and tr.out.count(b"HTTP/1.1 200 OK") == 2 and not tr.is_closing()


def connect(proto: FrontProtocol) -> tuple[FrontProtocol, FakeTransport]:
    """Another client connection to the same listener."""
    other = FrontProtocol(proto.state, proto.fallback, proto.listener)
    tr = FakeTransport()
    other.connection_made(tr)
    return other, tr


def now() -> float:
    return asyncio.get_running_loop().time()


async def test_a_head_trickling_in_is_408_and_closed_at_the_header_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    proto, tr, _, seen = make(monkeypatch)
    start = now()
    proto.data_received(POST[:5])
    listener = proto.listener
    listener.sweep(start + 9.0)
    proto.data_received(POST[5:10])  # a byte now and then does not move the deadline
    listener.sweep(start + 9.9)
    assert not tr.is_closing()
    listener.sweep(start + 10.5)
    assert tr.closed and tr.out.startswith(b"HTTP/1.1 408 ") and b"connection: close" in tr.out
    assert b"request head did not arrive within 10 s" in tr.out and not seen
    assert proto.state.metrics.rejected["read_timeout"] == 1


async def test_a_body_slower_than_the_body_timeout_is_408_with_its_request_id(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    proto, tr, _, seen = make(monkeypatch)
    head_end = POST.index(b"\r\n\r\n") + 4
    proto.data_received(POST[:head_end].replace(b"host: r", b"x-request-id: slow-1") + BODY[:3])
    start = now()
    proto.listener.sweep(start + 29.0)  # past the head's 10 s, within the body's 30
    assert not tr.is_closing()
    proto.listener.sweep(start + 30.5)
    assert tr.closed and tr.out.startswith(b"HTTP/1.1 408 ") and b"x-request-id: slow-1" in tr.out
    assert b"request body did not arrive within 30 s" in tr.out and not seen


async def test_served_and_pipelined_requests_are_never_timed_out_only_idled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    release, held = held_answer()
    proto, tr, _, seen = make(monkeypatch, held)
    proto.data_received(POST + POST[:10])  # the next request's first bytes wait behind a busy one
    await settle()
    proto.listener.sweep(now() + 60)
    assert not tr.is_closing() and len(seen) == 1
    release.set()
    proto.data_received(POST[10:])
    await settle()
    assert len(seen) == 2 and proto.read_by is None
    proto.listener.sweep(now() + 5)  # idle for less than the keep-alive timeout: kept
    assert not tr.is_closing() and tr.out.count(b"HTTP/1.1 200 OK") == 2
    proto.listener.sweep(now() + proto.state.cfg.keepalive_timeout_s + 1)
    assert tr.closed and b"408" not in tr.out


async def test_at_max_connections_the_longest_idle_makes_room(monkeypatch: pytest.MonkeyPatch) -> None:
    first, first_tr, _, _ = make(monkeypatch, max_connections=2)
    first.data_received(POST)
    await settle()  # answered: idle since now
    second, second_tr = connect(first)
    second.data_received(POST[:10])  # reading a head: busy
    third, third_tr = connect(first)
    assert first_tr.closed and not second_tr.closed and not third_tr.closed
    assert third in first.listener.connections


async def test_at_max_connections_with_none_idle_a_newcomer_gets_503(monkeypatch: pytest.MonkeyPatch) -> None:
    first, first_tr, fallback, _ = make(monkeypatch, max_connections=2)
    first.data_received(POST[:10])
    fallback.connections.append(object())  # one connection handed to aiohttp counts too
    second, second_tr = connect(first)
    assert second_tr.closed and second_tr.out.startswith(b"HTTP/1.1 503 ")
    assert b"max_connections 2" in second_tr.out and b"connection: close" in second_tr.out
    second.data_received(POST)  # bytes already on their way are dropped, never served
    await settle()
    assert second not in first.listener.connections and not first_tr.closed
    assert first.state.metrics.rejected["too_many_connections"] == 1
    fallback.connections.clear()
    _, third_tr = connect(first)
    assert not third_tr.closed


async def test_a_413_sent_while_the_head_trickled_in_is_not_followed_by_a_408(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    proto, tr, _, _ = make(monkeypatch, max_body=4)
    proto.data_received(POST[:10])  # the head's deadline starts
    proto.data_received(POST[10:])  # whole now: over the body limit
    proto.listener.sweep(now() + 60)  # before the transport reports the connection lost
    assert tr.out.count(b"HTTP/1.1 ") == 1 and tr.out.startswith(b"HTTP/1.1 413 ")
    assert proto.state.metrics.rejected["read_timeout"] == 0


async def test_a_head_that_is_not_valid_http_is_a_400_quoting_none_of_it_never_handed_over(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    proto, tr, fallback, seen = make(monkeypatch)
    proto.data_received(b"GET /health HTTP/1.1\r\nbad header SECRET: x\r\n\r\n")
    assert tr.closed and tr.out.startswith(b"HTTP/1.1 400 ") and b"connection: close" in tr.out
    assert b"SECRET" not in tr.out and b'"type": "BadRequestError"' in tr.out
    assert not fallback.made and not seen
    assert proto.state.metrics.rejected["bad_request"] == 1
