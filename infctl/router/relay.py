"""Forwarding one request over the lean HTTP/1.1 client (``http1``) and relaying its answer as raw bytes.

The same contract as ``upstream.forward`` (retry safety first): ``UpstreamFailed`` exactly while nothing has
reached the client; once the client has a byte, a failure leaves its response open and short (whole chunks
only: ``http1``) for the caller to end with an error event or a continuation, or to cut. What
differs is the path of a token: the upstream connection's ``data_received`` writes the chunk, framing and
all, to the client's socket, so the handler task is not woken per chunk and nothing is de- or re-chunked.
The client's head goes out in the same ``write`` as the first content bytes; an event stream's opening
is judged first (``opening``: role-only chat chunks wait for the next event, an engine's 5xx error event
there is ``UpstreamFailed``).

It needs an HTTP/1.1 client on the lean front's own connection (chunked framing passes through as is);
``attempt.relay_answer`` sends anything else through ``upstream.forward``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from functools import lru_cache
from urllib.parse import urlsplit

from aiohttp import web

from infctl.router.client import ClientRequest
from infctl.router.http1 import Http1Connection, Http1Pool, ResponseHead
from infctl.router.opening import ErrorEvent, judge_opening
from infctl.router.upstream import MAX_KEPT_BYTES, RelayResult, UpstreamFailed

_KEEP_RESPONSE_HEADERS = ("content-type", "retry-after")
_HIGH_WATER = 256 * 1024
"""Client-side send buffer (bytes) above which the upstream is paused until the client catches up."""
_LOW_WATER = 64 * 1024
_DRAIN_POLL_S = 0.005


class RelayedResponse(web.StreamResponse):
    """The lean front's answer once the relay has written head and body to the client's socket itself:
    it tells the front only whether to keep the connection. (A ``StreamResponse`` for the one return type
    of ``proxy.generate``; never handed to aiohttp's server, whose connections the relay never writes to.)
    """

    def __init__(self, status: int, *, keep_alive: bool) -> None:
        super().__init__(status=status)
        self._relay_keep_alive = keep_alive

    @property
    def keep_alive(self) -> bool:
        return self._relay_keep_alive

    def force_close(self) -> None:
        self._relay_keep_alive = False


class _Relay:
    """The sink of one exchange: writes the client's head with the first content, then every chunk."""

    def __init__(
        self,
        request: ClientRequest,
        request_id: str,
        conn: Http1Connection,
        sent_at: float,
        on_first: Callable[[], None] | None = None,
        keep: list[bytes] | None = None,
    ) -> None:
        self.keep = keep
        """Where the body bytes written to the client are kept (None: not kept)."""
        self.chunked = False
        self.loop = conn.loop
        self.on_first = on_first
        self.down = request.transport
        self.keep_alive = request.keep_alive
        self.request_id = request_id
        self.conn, self.sent_at = conn, sent_at
        self.status = 0
        self.first: float | None = None
        self.relayed = 0
        self.wrote = False
        self.client_gone = False
        self.error: Exception | None = None
        self.answered = False
        self._head: bytes | None = None
        self._opening: bytes | None = None
        """An event stream's body held while its opening is judged (``opening``); None: not judging."""
        self._over = self._paused = False
        self._waiter: asyncio.Future[None] = self.loop.create_future()

    def head(self, head: ResponseHead) -> bool:
        self.status = head.status
        if head.status >= 500:
            self._done(UpstreamFailed(f"HTTP {head.status}", status=head.status))
            return False
        if head.status == 200 and "event-stream" in head.headers.get("content-type", ""):
            self._opening = b""
        if head.chunked:
            framing = "transfer-encoding: chunked\r\n"
            self.chunked = True
        elif head.length is not None or head.status in (204, 304):
            framing = f"content-length: {head.length or 0}\r\n"
        else:
            framing = ""
            self.keep_alive = False  # read until the upstream closes: so must the client
        if not self.keep_alive:
            framing += "connection: close\r\n"
        kept = tuple(head.headers.get(n) for n in _KEEP_RESPONSE_HEADERS)
        self._head = b"".join(
            (
                _status_and_kept(head.status, head.reason, kept),
                f"x-request-id: {self.request_id}\r\n{framing}\r\n".encode("utf-8", "surrogateescape"),
            )
        )
        return True

    def body(self, raw: bytes) -> None:
        down = self.down
        if down is None or down.is_closing():
            self.client_gone = True
            self.conn.abort()
            self._done(None)
            return
        if self._opening is not None:
            held = self._judged(raw)
            if held is None:
                return
            raw = held
        if self.keep is not None:
            self.keep.append(raw)
            if self.relayed > MAX_KEPT_BYTES:
                self.keep = None
        if self._head is not None:
            self.first = self.loop.time() - self.sent_at
            raw, self._head = self._head + raw, None
            self.wrote = True
            if self.on_first is not None:
                self.on_first()
        down.write(raw)
        self.relayed += len(raw)
        if down.get_write_buffer_size() > _HIGH_WATER and self.conn.transport is not None:
            self.conn.transport.pause_reading()
            self._paused = True
            if not self._waiter.done():
                self._waiter.set_result(None)

    def _judged(self, raw: bytes) -> bytes | None:
        """The bytes to write now (held ones included) once the stream's opening is judged; None: held
        (the opening is role-only chunks so far) or failed (an engine's 5xx error event, nothing sent)."""
        data = self._opening + raw if self._opening else raw
        verdict = judge_opening(data, chunked=self.chunked)
        if verdict == "hold":
            self._opening = data
            return None
        self._opening = None
        if isinstance(verdict, ErrorEvent):
            self.conn.abort()
            self._done(UpstreamFailed(verdict.reason, status=verdict.status))
            return None
        return data

    def end(self) -> None:
        if self._head is not None and self.down is not None and not self.down.is_closing():
            # An empty body: the head alone; or a stream that ended while its opening was held.
            held, self._opening = self._opening or b"", None
            out, self._head, self.wrote = self._head + held, None, True
            self.down.write(out)
            if held:
                self.first, self.relayed = self.loop.time() - self.sent_at, len(out)
                if self.keep is not None:
                    self.keep.append(held)
                if self.on_first is not None:
                    self.on_first()
        self._done(None)

    def fail(self, exc: Exception, *, answered: bool) -> None:
        self.answered = answered
        self._done(exc)

    @property
    def over(self) -> bool:
        """The exchange has ended (its connection is back in the pool or closed)."""
        return self._over

    def _done(self, exc: Exception | None) -> None:
        if not self._over:
            self._over, self.error = True, exc
            if not self._waiter.done():
                self._waiter.set_result(None)

    async def wait(self) -> None:
        """Until the exchange is over, pausing the upstream while the client's buffer is full."""
        while True:
            await self._waiter
            if self._over or not self._paused:
                return
            down = self.down
            # A transport's buffer level has no public event; polling runs only while a client is slow.
            while down is not None and not down.is_closing() and down.get_write_buffer_size() > _LOW_WATER:  # noqa: ASYNC110
                await asyncio.sleep(_DRAIN_POLL_S)
            if self.over:
                return  # ended while we polled (e.g. it failed): nothing would wake a new waiter
            if down is None or down.is_closing():
                self.client_gone = True
                self.conn.abort()
                return
            self._paused, self._waiter = False, self.loop.create_future()
            if self.conn.transport is not None:
                self.conn.transport.resume_reading()


async def forward_lean(
    request: ClientRequest,
    pool: Http1Pool,
    url: str,
    body: bytes,
    headers: Mapping[str, str],
    *,
    request_id: str,
    on_first: Callable[[], None] | None = None,
    keep: list[bytes] | None = None,
) -> tuple[web.StreamResponse, RelayResult]:
    """POST ``body`` to ``url`` over a pooled connection and relay the answer to ``request``'s client.
    ``keep``: a list the bytes written to the client are appended to (``RelayResult.kept``)."""
    host, port, payload_head = _request_head(url)
    lines = [
        payload_head,
        *(f"{k}: {v}\r\n" for k, v in headers.items()),
        f"content-length: {len(body)}\r\n\r\n",
    ]
    payload = "".join(lines).encode("utf-8", "surrogateescape") + body
    loop = pool.loop
    for fresh in (False, True):
        sent_at = loop.time()
        try:
            conn = await pool.acquire(host, port, fresh=fresh)
        except (OSError, TimeoutError) as exc:
            raise UpstreamFailed(f"connect {host}:{port}: {type(exc).__name__}: {exc}", fatal=True) from exc
        relay = _Relay(request, request_id, conn, sent_at, on_first, keep)
        conn.send(payload, relay, pool.settings.read_timeout_s)
        try:
            await relay.wait()
        except BaseException:
            # Cancellation when the client disconnects included: dropping the upstream connection is how
            # the engine learns to abort the request and free its KV blocks. An exchange already over has
            # given its connection back to the pool, where another request may hold it now: leave it.
            if not relay.over:
                conn.abort()
            raise
        if relay.error is None or relay.wrote:
            break
        if isinstance(relay.error, UpstreamFailed):
            raise relay.error
        if not (conn.reused and not relay.answered and not fresh):
            raise UpstreamFailed(f"broke before the first byte: {type(relay.error).__name__}: {relay.error}")
        # A pooled connection the server had closed while idle: once more on a fresh one, same backend.
    out = RelayedResponse(relay.status, keep_alive=relay.keep_alive)
    completed = relay.error is None and not relay.client_gone
    if not completed:
        out.force_close()  # a cut stream: the client must see it cut, not a clean end
    return out, RelayResult(
        relay.status,
        relay.first,
        relay.relayed,
        completed,
        client_gone=relay.client_gone,
        kept=relay.keep,
        appendable=relay.chunked and not completed,
    )


@lru_cache(maxsize=256)
def _status_and_kept(status: int, reason: str, kept: tuple[str | None, ...]) -> bytes:
    """The client's status line and the upstream headers it keeps (``_KEEP_RESPONSE_HEADERS``, values in
    that order, None: absent): the same few for every answer of a backend, so serialised once."""
    lines = [f"HTTP/1.1 {status} {reason}\r\n"]
    lines += [f"{n}: {v}\r\n" for n, v in zip(_KEEP_RESPONSE_HEADERS, kept, strict=True) if v is not None]
    return "".join(lines).encode("utf-8", "surrogateescape")


@lru_cache(maxsize=1024)
def _request_head(url: str) -> tuple[str, int, str]:
    """(host, port, request line and Host header) for a plain-HTTP URL."""
    parts = urlsplit(url)
    host, port = parts.hostname or "", parts.port or 80
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return host, port, f"POST {target} HTTP/1.1\r\nhost: {parts.netloc}\r\n"


def lean_capable(url: str, request: ClientRequest) -> bool:
    """Whether this exchange can take the lean path: plain HTTP upstream, HTTP/1.1 client."""
    return url.startswith("http://") and request.version >= (1, 1)
