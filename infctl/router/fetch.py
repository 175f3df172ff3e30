"""Whole-answer exchanges over the lean HTTP/1.1 client (``http1``): the PD prefill leg, mirrored copies,
and, through :class:`EngineGet`, the router's scrapes, health probes and ``/v1/models`` (over aiohttp's
client, the router's other one, where the lean pool cannot go: HTTPS engines, or ``--upstream-client
aiohttp``).

``forward_lean`` (``relay``) streams an answer to a client as it arrives; these exchanges need the answer
whole, so a :class:`_Collect` sink buffers it (de-chunked at the end). Why not aiohttp's or httpx's client
here: every engine is scraped ten times a second and every PD request makes one of these calls. ``py-spy``
of a router at 80 req/s put 12% of its CPU in scraping one engine through httpx's transport; httpx's client
over the lean pool halved that, and the bare ``fetch`` of :class:`EngineGet` halves it again
(``benchmarks/bench_metrics_parse.py`` prints all three, parse included).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

import aiohttp

from infctl.router.http1 import Http1Pool, ProtocolError, ResponseHead
from infctl.router.upstream import UpstreamFailed
from infctl.telemetry.scrape import Getter, NoAnswer


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    headers: dict[str, str]
    """Header names in lower case."""
    body: bytes
    """The content, de-chunked."""


class FetchError(Exception):
    """An exchange that produced no answer. ``stage``: ``connect`` or ``connect_timeout`` (nothing was
    sent), ``timeout`` (the upstream fell silent for the read timeout), ``read`` (the connection broke) or
    ``protocol`` (the answer was not HTTP/1.1)."""

    def __init__(self, message: str, stage: str) -> None:
        super().__init__(message)
        self.stage = stage


class _Collect:
    """A sink that keeps the whole answer."""

    def __init__(self) -> None:
        self.got: ResponseHead | None = None
        self.parts: list[bytes] = []
        self.error: Exception | None = None
        self.answered = False
        self.finished = False
        """The exchange ended (its connection back in the pool or closed), whatever became of ``done``."""
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def head(self, head: ResponseHead) -> bool:
        self.got = head
        return True

    def body(self, raw: bytes) -> None:
        self.parts.append(raw)

    def end(self) -> None:
        self.finished = True
        if not self.done.done():
            self.done.set_result(None)

    def fail(self, exc: Exception, *, answered: bool) -> None:
        self.error, self.answered = exc, answered
        self.end()


async def fetch(
    pool: Http1Pool,
    method: str,
    url: str,
    *,
    body: bytes = b"",
    headers: Mapping[str, str] | None = None,
    read_timeout_s: float | None = None,
) -> Answer:
    """``method url`` (plain HTTP) and its whole answer; FetchError when there is none. A pooled
    connection the server closed while idle is retried once on a fresh one, as ``forward_lean`` does."""
    parts = urlsplit(url)
    host, port = parts.hostname or "", parts.port or 80
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    lines = [f"{method} {target} HTTP/1.1\r\nhost: {parts.netloc}\r\n"]
    lines += [f"{k}: {v}\r\n" for k, v in (headers or {}).items() if k.lower() not in _OWN_HEADERS]
    if body or method not in ("GET", "HEAD"):
        lines.append(f"content-length: {len(body)}\r\n")
    payload = "".join(lines).encode("utf-8", "surrogateescape") + b"\r\n" + body
    timeout = pool.settings.read_timeout_s if read_timeout_s is None else read_timeout_s
    for fresh in (False, True):
        try:
            conn = await pool.acquire(host, port, fresh=fresh)
        except TimeoutError as exc:
            raise FetchError(f"connect {host}:{port}: timed out", "connect_timeout") from exc
        except OSError as exc:
            raise FetchError(f"connect {host}:{port}: {type(exc).__name__}: {exc}", "connect") from exc
        sink = _Collect()
        conn.send(payload, sink, timeout)
        try:
            await sink.done
        except BaseException:
            # A cancelled caller cancels ``done`` too: whether the exchange ended is ``finished``'s to say
            # (ended, the connection is back in the pool, maybe in use already).
            if not sink.finished:
                conn.abort()
            raise
        head = sink.got
        if sink.error is None and head is not None:
            raw = b"".join(sink.parts)
            try:
                # A copy: the parsed head is shared with every answer that had the same head bytes.
                body = dechunk(raw) if head.chunked else raw
                return Answer(head.status, dict(head.headers), body)
            except ProtocolError as exc:
                raise FetchError(str(exc), "protocol") from exc
        if not (conn.reused and not sink.answered and not fresh):
            break
    error = sink.error
    raise FetchError(f"{type(error).__name__}: {error}", _stage(error))


def _stage(error: Exception | None) -> str:
    if isinstance(error, TimeoutError):
        return "timeout"
    return "protocol" if isinstance(error, ProtocolError) else "read"


# Written by ``fetch`` itself, or not negotiated: answers come back unencoded, as ``dechunk`` reads them.
_OWN_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection", "accept-encoding"})


def dechunk(raw: bytes) -> bytes:
    """The content of a complete chunked body (framing, extensions and trailers dropped)."""
    out: list[bytes] = []
    i = 0
    while True:
        eol = raw.find(b"\r\n", i)
        if eol < 0:
            raise ProtocolError("chunked body ends without its last chunk")
        try:
            size = int(raw[i:eol].split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise ProtocolError(f"bad chunk size line {raw[i:eol][:40]!r}") from None
        if size == 0:
            return b"".join(out)
        out.append(raw[eol + 2 : eol + 2 + size])
        i = eol + 2 + size + 2


async def post_whole(pool: Http1Pool, url: str, body: bytes, headers: Mapping[str, str]) -> tuple[int, bytes]:
    """A non-streamed POST whose whole answer the router needs, with ``upstream.post_json``'s contract:
    UpstreamFailed on connect errors (fatal), 5xx answers and broken exchanges."""
    try:
        answer = await fetch(pool, "POST", url, body=body, headers=headers)
    except FetchError as exc:
        raise UpstreamFailed(str(exc), fatal=exc.stage.startswith("connect")) from exc
    if answer.status >= 500:
        raise UpstreamFailed(f"HTTP {answer.status}", status=answer.status)
    return answer.status, answer.body


_ACCEPT = {"accept": "text/plain"}
"""What a scrape asks for: the classic text exposition, not OpenMetrics."""


@dataclass(frozen=True, slots=True)
class SessionGet:
    """The router's aiohttp client as a telemetry ``Getter``, for the GETs the lean pool cannot make
    (HTTPS engines) or that the router sends through aiohttp's client (``--upstream-client aiohttp``).
    ``timeout_s``: longest silence from the engine (the session's connect timeout applies too)."""

    session: aiohttp.ClientSession
    timeout_s: float

    async def __call__(self, url: str, timeout_s: float | None = None) -> tuple[int, bytes]:
        read = self.timeout_s if timeout_s is None else timeout_s
        timeout = aiohttp.ClientTimeout(total=None, sock_read=read)
        try:
            async with self.session.get(url, headers=_ACCEPT, timeout=timeout) as resp:
                return resp.status, await resp.read()
        except TimeoutError as exc:
            raise NoAnswer(f"timed out ({type(exc).__name__}: {exc})", timed_out=True) from None
        except aiohttp.ClientError as exc:
            raise NoAnswer(f"{type(exc).__name__}: {exc}", timed_out=False) from None


class EngineGet:
    """The router's GETs of its engines (scrapes, health probes, ``/v1/models``), a telemetry ``Getter``:
    plain HTTP through the lean pool's bare :func:`fetch`; HTTPS, or every URL when there is no ``pool``
    (the router runs on aiohttp's client), through ``other`` (the router's :class:`SessionGet`; a test or
    a benchmark may give any ``Getter``).
    Failures raise ``NoAnswer``; ``timed_out`` when the engine stayed silent (or never accepted) in time.
    Timeouts: connect, the pool's (``Http1Settings.connect_timeout_s``) or ``other``'s; silence,
    ``timeout_s`` unless a call gives its own."""

    __slots__ = ("other", "pool", "timeout_s")

    def __init__(self, pool: Http1Pool | None, other: Getter, timeout_s: float) -> None:
        self.pool = pool
        self.other = other
        self.timeout_s = timeout_s
        """Longest silence from an engine, seconds."""

    async def __call__(self, url: str, timeout_s: float | None = None) -> tuple[int, bytes]:
        timeout = self.timeout_s if timeout_s is None else timeout_s
        if self.pool is None or not url.startswith("http://"):
            return await self.other(url, timeout)
        try:
            answer = await fetch(self.pool, "GET", url, headers=_ACCEPT, read_timeout_s=timeout)
        except FetchError as exc:
            silent = exc.stage == "timeout"  # "connect_timeout" says "timed out" already
            message = f"timed out ({exc})" if silent else str(exc)
            raise NoAnswer(message, timed_out=silent or exc.stage == "connect_timeout") from None
        return answer.status, answer.body
