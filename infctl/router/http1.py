"""A lean HTTP/1.1 client for the router's hot path: one keep-alive pool per upstream, one ``transport.write``
per request, the response head parsed once, and the body handed on as raw bytes from ``data_received``.

Why not aiohttp's client here: relaying a token stream through it costs, per chunk, a parser feed, a
``StreamReader`` wake-up of the handler task, de-chunking and re-chunking; on this path that was about half
of the router's own time in front of a token (``bench_router_overhead.py --upstream-clients lean,aiohttp``).
Here a chunk's bytes go from the upstream socket to the sink in the same callback that read them; the
chunked framing is only scanned (to find the end of the message), never rewritten.

One exchange at a time per connection. The sink (see ``Sink``) sees the head, then the body's raw bytes
from the first byte of content onwards (framing bytes before it are held back, so a backend that dies
between its head and its first token has given the sink nothing), then the end or the failure. A chunked
body reaches the sink in whole chunks: the bytes of a chunk still arriving wait for its end (an engine
writes one event per chunk, so a client whose upstream dies has whole events only, and the router can
append an error event or a continuation to its stream: ``infctl.router.resume``).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Protocol, cast

from infctl.router.http1_parse import ProtocolError, ResponseHead, chunk_size, parse_head_cached

__all__ = ["Http1Connection", "Http1Pool", "Http1Settings", "ProtocolError", "ResponseHead", "Sink"]

# How a message's body is delimited (RFC 9112 section 6.3).
_CHUNKED, _LENGTH, _CLOSE = 1, 2, 3
_NO_BODY_STATUS = frozenset({204, 304})
_MAX_SWEEP_S = 1.0
"""Longest pause between two checks of the upstream connections' read timeouts, seconds."""


@dataclass(frozen=True, slots=True)
class Http1Settings:
    """Tunables of the lean upstream client."""

    connect_timeout_s: float = 2.0
    """Longest a TCP connect may take, seconds."""
    read_timeout_s: float = 600.0
    """Longest silence allowed between upstream bytes once a request is sent, seconds."""
    idle_timeout_s: float = 15.0
    """A pooled connection idle longer than this is closed instead of reused, seconds (aiohttp's default)."""
    max_idle_per_origin: int = 256
    """Idle connections kept per upstream; more are closed when released."""
    max_head_bytes: int = 65_536
    """Largest response head accepted; a larger one is a protocol error."""


class Sink(Protocol):
    """Where a connection delivers one response; every method is called from the event loop's callbacks."""

    def head(self, head: ResponseHead) -> bool:
        """The response head; return False to abandon the exchange (the connection is then closed)."""

    def body(self, raw: bytes) -> None:
        """Body bytes exactly as framed by the upstream (chunk sizes included), starting with content."""

    def end(self) -> None:
        """The body is complete (an empty body calls ``end`` without any ``body``)."""

    def fail(self, exc: Exception, *, answered: bool) -> None:
        """The exchange failed; ``answered``: some response byte had arrived (a reused connection that fails
        unanswered was most likely closed by the server while idle, and may be retried on a fresh one)."""


class Http1Connection(asyncio.Protocol):
    """One keep-alive connection to one upstream; ``send`` starts an exchange, the sink hears the rest."""

    def __init__(self, pool: Http1Pool, origin: tuple[str, int]) -> None:
        self.pool, self.origin = pool, origin
        self.transport: asyncio.Transport | None = None
        self.reused = False
        self.idle_since = 0.0
        self._sink: Sink | None = None
        self.loop = pool.loop
        self.timeout_s = 0.0
        """This exchange's longest upstream silence, seconds (the pool's sweep enforces it)."""
        self._reset()

    def _reset(self) -> None:
        self._buf = b""
        self._head: ResponseHead | None = None
        self._mode = 0
        self._left = 0  # length mode: body bytes left; chunked: data + CRLF left in the current chunk
        self._line = b""  # chunked: a size or trailer line split across reads
        self._trailer = False
        self._content = False  # a content byte has been seen (held framing bytes may now go out)
        self._held = b""  # bytes not given to the sink yet (chunked: the chunk still arriving)
        self._whole = 0  # chunked: index in the last read just past its last complete chunk
        self._keep = True
        self._answered = False
        self._last = 0.0

    # -- asyncio.Protocol ----------------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not an asyncio.Transport subclass

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.pool.forget(self)
        if self._sink is None:
            return
        if exc is None and self._mode == _CLOSE and self._head is not None:
            self._flush_held()
            self._finish(None)
        else:
            self._finish(exc or ConnectionResetError("upstream closed the connection"))

    def data_received(self, data: bytes) -> None:
        if self._sink is None:  # bytes nobody asked for: this connection cannot be trusted any more
            self.close()
            return
        self._answered = True
        self._last = self.loop.time()
        try:
            if self._head is None:
                rest = self._read_head(data)
                if rest is None:
                    return
                data = rest
            self._read_body(data)
        except ProtocolError as exc:
            self._finish(exc)

    # -- the exchange --------------------------------------------------------------------------------------
    def send(self, request: bytes, sink: Sink, read_timeout_s: float) -> None:
        """Write ``request`` (head and body, already serialised) and deliver the answer to ``sink``."""
        assert self.transport is not None and self._sink is None
        self._sink = sink
        self._reset()
        self._last = self.loop.time()
        self.timeout_s = read_timeout_s
        self.pool.watch(self)
        self.transport.write(request)

    def abort(self) -> None:
        """Drop the exchange and the connection (how an engine learns that its client went away)."""
        self._sink = None
        self.pool.unwatch(self)
        if self.transport is not None:
            self.transport.abort()

    def close(self) -> None:
        self._sink = None
        self.pool.unwatch(self)
        if self.transport is not None:
            self.transport.close()

    def check_silence(self, now: float) -> None:
        """End the exchange with a TimeoutError if the upstream has been silent for ``timeout_s``."""
        if self.transport is not None and not self.transport.is_reading():
            # The router paused reading for a slow client: upstream silence is ours, not the engine's.
            self._last = now
        elif now - self._last >= self.timeout_s:
            self._finish(TimeoutError(f"no upstream bytes for {self.timeout_s:g} s"))

    def _finish(self, exc: Exception | None) -> None:
        sink, self._sink = self._sink, None
        self.pool.unwatch(self)
        if self.transport is not None and exc is not None:
            self.transport.abort()
        elif self.transport is not None and not self._keep:
            self.transport.close()
        if sink is None:
            return
        if exc is None:
            if self._keep and self.transport is not None:
                self.transport.resume_reading()  # paused for a slow client: the next exchange must read
                self.pool.release(self)
            sink.end()
        else:
            sink.fail(exc, answered=self._answered)

    # -- parsing -------------------------------------------------------------------------------------------
    def _read_head(self, data: bytes) -> bytes | None:
        """Bytes after the head when the exchange goes on with a body, else None (more head to come, or
        the exchange is over)."""
        buf = self._buf + data if self._buf else data
        while True:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > self.pool.settings.max_head_bytes:
                    raise ProtocolError("response head too large")
                self._buf = buf
                return None
            head = parse_head_cached(buf[:end])
            buf = buf[end + 4 :]
            if head.status >= 200:  # 1xx: informational, the real head follows
                break
        self._buf = b""
        self._head = head
        self._keep = head.headers.get("connection", "").lower() != "close"
        if head.status in _NO_BODY_STATUS or head.length == 0:
            self._mode = _LENGTH
        elif head.chunked:
            self._mode = _CHUNKED
        elif head.length is not None:
            self._mode, self._left = _LENGTH, head.length
        else:
            self._mode, self._keep = _CLOSE, False
        assert self._sink is not None
        if not self._sink.head(head):
            self.abort()
            return None
        if self._mode == _LENGTH and self._left == 0:
            if buf:
                self._keep = False  # bytes after a complete answer: the stream is out of step
            self._finish(None)
            return None
        return buf

    def _read_body(self, data: bytes) -> None:
        if not data:
            return
        if self._mode == _CHUNKED:
            self._read_chunked(data)
            return
        if self._mode == _LENGTH:
            if len(data) >= self._left:
                end, self._keep = self._left, self._keep and len(data) == self._left
            else:
                end = -1
            self._left -= len(data) if end < 0 else end
            self._content = True
        else:
            end, self._content = -1, True
        if end >= 0 and end < len(data):
            data, self._keep = data[:end], False
        assert self._sink is not None
        if self._content or end >= 0:
            if self._held:
                data, self._held = self._held + data, b""
            self._sink.body(data)
        else:
            self._held += data
        if end >= 0:
            self._finish(None)

    def _read_chunked(self, data: bytes) -> None:
        """Give the sink the chunks this read completes (with any held start of the first), hold the rest."""
        end = self._scan_chunked(data)
        cut = end if end >= 0 else self._whole
        if cut == 0:
            self._held += data  # no chunk ended in this read
            return
        n = len(data)
        if end >= 0 and end < n:
            self._keep = False  # bytes after a complete answer: the stream is out of step
        out = data if cut >= n else data[:cut]
        if self._held:
            out, self._held = self._held + out, b""
        if end < 0 and cut < n:
            self._held = data[cut:]
        assert self._sink is not None
        self._sink.body(out)
        if end >= 0:
            self._finish(None)

    def _scan_chunked(self, data: bytes) -> int:
        """Advance over chunked framing; the index just past the message's end, or -1 if it goes on (then
        ``_whole`` is the index just past the last chunk completed in ``data``, 0 for none)."""
        i, n = 0, len(data)
        whole = 0
        while i < n:
            if self._left:
                take = min(self._left, n - i)
                self._left -= take
                i += take
                if not self._left:
                    whole = i
                continue
            j = data.find(b"\n", i)
            if j < 0:
                self._line += data[i:]
                if len(self._line) > 4096:
                    raise ProtocolError("chunk size line too long")
                self._whole = whole
                return -1
            line = (self._line + data[i:j] if self._line else data[i:j]).rstrip(b"\r")
            self._line, i = b"", j + 1
            if self._trailer:
                if not line:
                    return i
                continue
            self._left = chunk_size(line) + 2
            if self._left == 2:
                self._left, self._trailer = 0, True
        self._whole = whole
        return -1

    def _flush_held(self) -> None:
        if self._held and self._sink is not None:
            held, self._held = self._held, b""
            self._sink.body(held)


@dataclass
class Http1Pool:
    """Idle keep-alive connections per (host, port). ``acquire`` connects when none is idle."""

    settings: Http1Settings = field(default_factory=Http1Settings)
    _idle: dict[tuple[str, int], list[Http1Connection]] = field(default_factory=dict)
    _closed: bool = False
    _loop: asyncio.AbstractEventLoop | None = field(default=None, repr=False)
    _busy: set[Http1Connection] = field(default_factory=set, repr=False)
    """Connections in an exchange: their read timeouts are checked by one sweep for all (a timer per
    exchange cost ~2.5 us of each request's path in creating and cancelling it)."""
    _sweep: asyncio.TimerHandle | None = field(default=None, repr=False)
    _sweep_at: float = 0.0

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The running event loop, kept: on Python 3.11 asking asyncio for it is a getpid() system call,
        and the request path asked ~10 times per request. (One thread runs one loop at a time: a kept loop
        that is running is the running one.)"""
        loop = self._loop
        if loop is None or not loop.is_running():
            loop = self._loop = asyncio.get_running_loop()
        return loop

    async def acquire(self, host: str, port: int, *, fresh: bool = False) -> Http1Connection:
        """A connection to ``host:port`` ready for ``send``. Raises OSError or TimeoutError on connect."""
        origin = (host, port)
        idle = self._idle.get(origin)
        loop = self.loop
        now = loop.time()
        while idle and not fresh:
            conn = idle.pop()
            alive = conn.transport is not None and not conn.transport.is_closing()
            if alive and now - conn.idle_since < self.settings.idle_timeout_s:
                conn.reused = True
                return conn
            conn.close()
        connect = loop.create_connection(lambda: Http1Connection(self, origin), host, port)
        _, proto = await asyncio.wait_for(connect, self.settings.connect_timeout_s)
        return proto

    def release(self, conn: Http1Connection) -> None:
        idle = self._idle.setdefault(conn.origin, [])
        if self._closed or len(idle) >= self.settings.max_idle_per_origin:
            conn.close()
            return
        conn.idle_since = conn.loop.time()
        idle.append(conn)

    def forget(self, conn: Http1Connection) -> None:
        idle = self._idle.get(conn.origin)
        if idle and conn in idle:
            idle.remove(conn)

    def close(self) -> None:
        self._closed = True
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        for idle in self._idle.values():
            for conn in list(idle):
                conn.close()
        self._idle.clear()

    def watch(self, conn: Http1Connection) -> None:
        """Check ``conn``'s upstream silence from now until ``unwatch``: every quarter of its timeout
        (at most ``_MAX_SWEEP_S``), so a silent upstream fails between 1 and 1.25 timeouts after its last
        byte (or its timeout plus a second)."""
        self._busy.add(conn)
        due = conn.loop.time() + min(conn.timeout_s / 4, _MAX_SWEEP_S)
        if self._sweep is None or due < self._sweep_at:
            self._arm(due)

    def unwatch(self, conn: Http1Connection) -> None:
        self._busy.discard(conn)

    def _arm(self, at: float) -> None:
        if self._sweep is not None:
            self._sweep.cancel()
        self._sweep, self._sweep_at = self.loop.call_at(at, self._check_busy), at

    def _check_busy(self) -> None:
        self._sweep = None
        now = self.loop.time()
        for conn in list(self._busy):
            conn.check_silence(now)
        if self._busy:
            self._arm(now + min(min(c.timeout_s for c in self._busy) / 4, _MAX_SWEEP_S))

    def idle_count(self, host: str, port: int) -> int:
        return len(self._idle.get((host, port), ()))
