"""The lean front (``infctl router``'s default; ``--server aiohttp`` serves everything with aiohttp): an
asyncio protocol on the listening socket that serves the two generation POSTs itself and hands every other
request's connection to the aiohttp app (``infctl.router.splice``).

Why: aiohttp's server spends ~120 us of each request's TTFT before the handler starts (on Python 3.11 it
waits two event-loop turns per request). Here a complete request starts its handler task in the turn its
last byte arrives, straight into ``proxy.generate`` (the one routing path both fronts share), and the
answer goes out through ``relay.forward_lean``, which writes to the client's socket itself.

What stays aiohttp's: anything ``front_parse.parse_head`` does not take (admin, /metrics, /health, /ready,
/v1/models, chunked bodies, HTTP/1.0), and generation too when the upstream client is aiohttp's or a
backend is HTTPS. Such a connection is handed over for good: it is spliced, from the bytes buffered so far,
to the aiohttp app on a private Unix socket, which answers as if it had been there from the start. A head
that is not valid HTTP/1.1 (``front_parse.Malformed``) is answered here, a 400 in the OpenAI shape that
echoes none of its bytes, and so is a transfer coding the router does not decode (``front_parse.Refused``);
the connection then closes.

Slow and idle clients: a request head must arrive whole within ``header_timeout_s`` of its first byte and
a generation body within ``body_timeout_s`` of its head, else the client gets a 408 and the connection is
closed (one byte every few seconds would otherwise hold a socket for ever: slowloris); idle keep-alive
connections close ``keepalive_timeout_s`` (75) after their last answer, longer than clients keep them idle
(aiohttp's 15 s), so that a request is not sent on a connection the router is closing that instant.
At most ``max_connections`` are open at once (spliced ones included): at the limit the longest-idle
connection makes room, and with none idle the newcomer gets a 503.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from typing import TYPE_CHECKING, cast

from aiohttp import web

from infctl.router.eager import start_eagerly
from infctl.router.front_parse import Head, Incomplete, Refused, parse_head
from infctl.router.proxy import generate
from infctl.router.relay import RelayedResponse
from infctl.router.requests import error_response
from infctl.router.splice import Splicer

if TYPE_CHECKING:
    from infctl.router.state import RouterState

log = logging.getLogger(__name__)
_PAUSE_ABOVE = 256 * 1024
"""Bytes buffered behind a request being served (a pipelining client) above which reading pauses."""
_DROP_HEADERS = frozenset({"content-length", "connection", "transfer-encoding"})


class FrontRequest:
    """One generation request read by the front: what ``relay.ClientRequest`` asks for."""

    __slots__ = ("_body", "headers", "keep_alive", "path", "transport")
    version = (1, 1)

    def __init__(self, head: Head, body: bytes, transport: asyncio.Transport) -> None:
        self.headers, self.path, self.keep_alive = head.headers, head.path, head.keep_alive
        self.transport: asyncio.Transport | None = transport
        self._body = body

    async def read(self) -> bytes:
        return self._body


class FrontProtocol(asyncio.Protocol):
    """One client connection: requests are served one at a time (bytes of the next one wait in ``buf``)."""

    def __init__(self, state: RouterState, fallback: Splicer, listener: LeanListener) -> None:
        self.state, self.fallback, self.listener = state, fallback, listener
        self.loop = asyncio.get_running_loop()  # kept: each ask is a getpid() system call on 3.11
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.head: Head | None = None
        self.task: asyncio.Task[None] | None = None
        self.paused = False
        self.idle_since = 0.0
        self.read_by: float | None = None
        """Loop time by which the request being read must be whole (None: none is being read)."""
        self.eager = False
        """A request is running in ``_next``'s call, before its first wait (``task`` is still None)."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        tr = self.transport = cast(asyncio.Transport, transport)
        self.idle_since = self.loop.time()
        if not self.listener.make_room():
            self.state.metrics.rejected["too_many_connections"] += 1
            limit = self.state.cfg.max_connections
            answer = error_response(
                503, f"too many open connections (max_connections {limit})", kind="ServiceUnavailableError"
            )
            tr.write(_serialize(answer, keep_alive=False))
            tr.close()
            self.transport = None
            return
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.listener.connections.add(self)

    def data_received(self, data: bytes) -> None:
        if self.transport is None:
            return  # refused at connection_made, closing
        self.buf += data
        if self.task is None:
            self._next()
        elif len(self.buf) > _PAUSE_ABOVE and not self.paused and self.transport is not None:
            self.transport.pause_reading()
            self.paused = True

    def eof_received(self) -> bool:
        return False  # as aiohttp: a client that half-closes has gone (the transport closes, cancelling)

    def connection_lost(self, exc: Exception | None) -> None:
        self.listener.connections.discard(self)
        self.transport = None
        if self.task is not None:
            self.task.cancel()  # a client gone mid-request: the relay drops the upstream request

    @property
    def idle(self) -> bool:
        return self.task is None and not self.buf

    def _next(self) -> None:
        """Serve the requests at the head of ``buf`` while they are complete, one at a time (or hand over).
        Each starts in this callback (``eager.start_eagerly``): nothing queued on the loop runs between a
        request's last byte and its upstream send. One that finishes without waiting (an error answer) lets
        the next pipelined one start in this same loop."""
        while self.task is None and self.buf and self.transport is not None:
            request = self._complete_request(self.transport)
            if request is None:
                return
            self.eager = True
            try:
                started = start_eagerly(self._serve(request), self.loop)
            finally:
                self.eager = False
            if isinstance(started, asyncio.Task):
                self.task = started  # _serve's end (in the task) starts the next one

    def _complete_request(self, tr: asyncio.Transport) -> FrontRequest | None:
        """The request at the head of ``buf`` once it is whole; None while it is not (or once it was
        handed over or refused)."""
        head = self.head
        if head is None:
            try:
                head = parse_head(self.buf)
            except Incomplete:
                if self.read_by is None:
                    self.read_by = self.loop.time() + self.state.cfg.header_timeout_s
                return None
            except Refused as exc:
                self.state.metrics.rejected["bad_request"] += 1
                kind = "NotImplementedError" if exc.status == 501 else "BadRequestError"
                tr.write(_serialize(error_response(exc.status, exc.message, kind=kind), keep_alive=False))
                tr.close()
                self.read_by = None
                return None
            if head is None or not self.listener.lean_ok():
                self._hand_over(tr)
                return None
            if head.content_length > self.state.cfg.max_body_bytes:
                self.state.metrics.rejected["body_too_large"] += 1  # the reason aiohttp's front counts
                limit = self.state.cfg.max_body_bytes
                message = f"request body of {head.content_length} bytes is over the {limit}-byte limit"
                answer = error_response(413, message)
                if rid := head.headers.get("x-request-id"):
                    answer.headers["x-request-id"] = rid
                tr.write(_serialize(answer, keep_alive=False))
                tr.close()
                self.read_by = None
                return None
            self.head = head
            self.read_by = None
        end = head.size + head.content_length
        if len(self.buf) < end:
            if self.read_by is None:
                self.read_by = self.loop.time() + self.state.cfg.body_timeout_s
            return None
        body = bytes(self.buf[head.size : end])
        del self.buf[:end]
        self.head, self.read_by = None, None
        return FrontRequest(head, body, tr)

    async def _serve(self, request: FrontRequest) -> None:
        try:
            out = await generate(self.state, request, path=request.path)
        except Exception:  # what aiohttp would answer 500 for, in the OpenAI shape
            log.exception("lean front: unhandled error on %s", request.path)
            out = error_response(500, "internal router error", kind="InternalServerError")
        self.task = None
        tr = self.transport
        if tr is None:
            return
        self.idle_since = self.loop.time()
        if isinstance(out, RelayedResponse):
            keep = out.keep_alive
        else:
            keep = request.keep_alive and not (self.state.draining or self.state.handing_over)
            tr.write(_serialize(out, keep_alive=keep))
        if not keep or tr.is_closing():
            tr.close()
            return
        if self.paused:
            self.paused = False
            tr.resume_reading()
        if self.buf and not self.eager:
            self._next()  # (finished without waiting: the ``_next`` that started it goes on by itself)

    def time_out(self) -> None:
        """The request being read is late (see ``read_by``): a 408, and the connection closes."""
        tr = self.transport
        self.read_by = None
        if tr is None or tr.is_closing() or self.task is not None:
            return  # already answered (a 413) or going
        self.state.metrics.rejected["read_timeout"] += 1
        part = "body" if self.head is not None else "head"
        limit = self.state.cfg.body_timeout_s if self.head is not None else self.state.cfg.header_timeout_s
        answer = error_response(408, f"the request {part} did not arrive within {limit:g} s")
        if self.head is not None and (rid := self.head.headers.get("x-request-id")):
            answer.headers["x-request-id"] = rid
        tr.write(_serialize(answer, keep_alive=False))
        tr.close()

    def _hand_over(self, tr: asyncio.Transport) -> None:
        """From now on this connection is aiohttp's, starting with the bytes buffered so far."""
        self.listener.connections.discard(self)
        self.read_by = None
        self.transport = None
        if self.paused:
            tr.resume_reading()
        data, self.buf = bytes(self.buf), bytearray()
        self.fallback.take(tr, data)


def _serialize(resp: web.StreamResponse, *, keep_alive: bool) -> bytes:
    """A whole (non-streamed) aiohttp response as HTTP/1.1 bytes."""
    body = resp.body if isinstance(resp, web.Response) and isinstance(resp.body, bytes) else b""
    lines = [f"HTTP/1.1 {resp.status} {resp.reason}\r\n"]
    lines += [f"{k}: {v}\r\n" for k, v in resp.headers.items() if k.lower() not in _DROP_HEADERS]
    lines.append(f"content-length: {len(body)}\r\n")
    if not keep_alive:
        lines.append("connection: close\r\n")
    lines.append("\r\n")
    return "".join(lines).encode("latin-1") + body


class LeanListener:
    """The lean front's listening socket and the connections it still serves itself."""

    def __init__(self, state: RouterState, fallback: Splicer) -> None:
        self.state, self.fallback = state, fallback
        self.connections: set[FrontProtocol] = set()
        self.server: asyncio.Server | None = None
        self._sweeper: asyncio.Task[None] | None = None
        self._lean: tuple[int, bool] = (-1, False)
        """(``BackendPool.version``, the answer of :meth:`lean_ok` for it)."""

    @classmethod
    async def start(cls, state: RouterState, fallback: Splicer, host: str, port: int) -> LeanListener:
        self = cls(state, fallback)
        loop = asyncio.get_running_loop()
        # SO_REUSEPORT: a successor can listen on the same port before this router stops (``hand_over``).
        self.server = await loop.create_server(
            lambda: FrontProtocol(state, fallback, self), host, port, reuse_port=True
        )
        self._sweeper = asyncio.create_task(self._sweep())
        return self

    def lean_ok(self) -> bool:
        """Whether generation can go lean: the lean upstream client is on and every backend is plain HTTP
        (asked per request, so the answer is kept until the backend registry changes)."""
        pool = self.state.pool
        version, ok = self._lean
        if version != pool.version:
            ok = self.state.http1 is not None and all(
                pool.backend(b).url.startswith("http://") for b in pool.ids()
            )
            self._lean = (pool.version, ok)
        return ok

    async def _sweep(self) -> None:
        """Run :meth:`sweep` every quarter of the shortest timeout it enforces (a deadline is kept to within
        a quarter of itself late; 2.5 s at the defaults)."""
        cfg = self.state.cfg
        period = min(cfg.header_timeout_s, cfg.body_timeout_s, cfg.keepalive_timeout_s) / 4
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(period)
            self.sweep(loop.time())

    def sweep(self, now: float) -> None:
        """Close connections idle for ``keepalive_timeout_s``, and time out requests read too slowly."""
        self.close_idle(now - self.state.cfg.keepalive_timeout_s)
        for conn in list(self.connections):
            if conn.read_by is not None and conn.read_by < now:
                conn.time_out()

    def close_idle(self, since: float = float("inf")) -> None:
        """Close every connection with nothing in flight and nothing buffered since before ``since``."""
        for conn in list(self.connections):
            if conn.idle and conn.idle_since < since and conn.transport is not None:
                conn.transport.close()

    def make_room(self) -> bool:
        """Whether one more connection may open: under ``max_connections`` (counting those spliced to
        aiohttp, and not those already closing), or once the longest-idle connection has been closed."""
        limit, handed = self.state.cfg.max_connections, len(self.fallback.connections)
        if len(self.connections) + handed < limit:
            return True
        open_now = [c for c in self.connections if c.transport is not None and not c.transport.is_closing()]
        if len(open_now) + handed < limit:
            return True
        idle = [c for c in open_now if c.idle]
        if not idle:
            return False
        oldest = min(idle, key=lambda c: c.idle_since)
        assert oldest.transport is not None
        oldest.transport.close()
        return True

    @property
    def address(self) -> tuple[str, int]:
        assert self.server is not None
        host, port = self.server.sockets[0].getsockname()[:2]
        return str(host), int(port)

    async def close(self, grace_s: float) -> None:
        """Stop listening, close idle connections, give requests in flight ``grace_s``, then cut them
        (spliced ones included: aiohttp's shutdown follows)."""
        if self.server is not None:
            self.server.close()
        if self._sweeper is not None:
            self._sweeper.cancel()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace_s
        while True:
            self.close_idle()
            busy = [c for c in self.connections if c.task is not None]
            if not busy or loop.time() >= deadline:
                break
            await asyncio.sleep(0.01)
        for conn in list(self.connections):
            if conn.task is not None:
                conn.task.cancel()
            if conn.transport is not None:
                conn.transport.abort()
        self.fallback.abort_all()
