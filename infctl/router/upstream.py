"""Forwarding one request to one engine and relaying its answer, without buffering streams.

Retry safety is the point of this module: a request may be retried on another backend only while nothing
has reached the client. ``forward`` raises ``UpstreamFailed`` in exactly those cases (connection errors,
5xx heads, timeouts or broken connections before the first body byte: the client's head waits for it);
once it has started writing to the client it never raises that, so the caller cannot duplicate or splice a
stream.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import aiohttp
from aiohttp import web

from infctl.router.opening import ErrorEvent, judge_opening

if TYPE_CHECKING:
    from infctl.router.client import ClientRequest

# Hop-by-hop and length headers are recomputed by aiohttp on each side.
_DROP_REQUEST_HEADERS = frozenset(
    {"host", "content-length", "transfer-encoding", "connection", "keep-alive", "accept-encoding"}
)
_KEEP_RESPONSE_HEADERS = ("content-type", "x-request-id", "retry-after")


@dataclass(frozen=True, slots=True)
class RelayResult:
    status: int
    first_byte_s: float | None
    """Seconds from sending upstream to the first body byte relayed (router-side TTFT)."""
    bytes_relayed: int
    completed: bool
    """False when the upstream broke mid-stream or the client went away."""
    client_gone: bool = False
    """True when it was the client that went away (the backend is not to blame)."""
    kept: list[bytes] | None = None
    """The body bytes the client was given, as written (the lean relay: with the upstream's chunked
    framing), when the caller asked to keep them and they stayed under ``MAX_KEPT_BYTES``."""
    appendable: bool = False
    """A broken answer whose client response can still take more body: its framing is chunked (or
    aiohttp's own) and it ends at an event boundary, so an error event or a continuation can follow."""

    @property
    def broken(self) -> bool:
        """The upstream broke after the client had part of the answer (not the client leaving)."""
        return not self.completed and not self.client_gone and self.bytes_relayed > 0


MAX_KEPT_BYTES = 4 * 1024 * 1024
"""Most body bytes a relay keeps for a stream it may have to continue (``RelayResult.kept``): ~15,000 tokens
of chat chunks. A longer stream that breaks ends with an error event instead of a continuation."""


class UpstreamFailed(Exception):
    """The backend failed before anything reached the client: safe to retry elsewhere."""

    def __init__(
        self, reason: str, *, status: int | None = None, fatal: bool = False, backend: str | None = None
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status
        self.fatal = fatal
        """True for failures that say the backend is gone (connect refused), not just busy."""
        self.backend = backend
        """The backend to blame when it is not the one the request was finally sent to (a PD prefill leg)."""


def make_session(*, connect_timeout_s: float, read_timeout_s: float, limit: int = 0) -> aiohttp.ClientSession:
    """The one place the router builds its upstream HTTP client (keep-alive pool, no total timeout).

    No cookie jar: a proxy that kept the engines' cookies would send one client's to every other."""
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout_s, sock_read=read_timeout_s)
    connector = aiohttp.TCPConnector(limit=limit, ttl_dns_cache=300, enable_cleanup_closed=True)
    return aiohttp.ClientSession(
        timeout=timeout, connector=connector, auto_decompress=False, cookie_jar=aiohttp.DummyCookieJar()
    )


def upstream_headers(headers: Mapping[str, str], request_id: str) -> dict[str, str]:
    out = {k: v for k, v in headers.items() if k.lower() not in _DROP_REQUEST_HEADERS}
    out["x-request-id"] = request_id
    return out


_STALE_TRIES = 3
"""Tries of one POST whose connections the engine closes before answering (``send``)."""


async def send(
    session: aiohttp.ClientSession, url: str, body: bytes, headers: Mapping[str, str]
) -> aiohttp.ClientResponse:
    """POST ``body`` and return the response once its head has arrived; ``UpstreamFailed`` when none did.
    A connection the engine closed before any answer is tried again, as the lean client does with a pooled
    connection the engine had closed while idle (aiohttp does not retry a POST by itself). aiohttp cannot
    be told to take a new connection, and the next pooled one may be stale too: up to ``_STALE_TRIES``."""
    for last in [False] * (_STALE_TRIES - 1) + [True]:
        try:
            return await session.post(url, data=body, headers=headers)
        except aiohttp.ServerDisconnectedError as exc:
            if last:
                raise UpstreamFailed(f"{type(exc).__name__}: {exc}") from exc
        except (TimeoutError, aiohttp.ClientConnectionError) as exc:
            raise UpstreamFailed(f"{type(exc).__name__}: {exc}", fatal=_is_fatal(exc)) from exc
    raise AssertionError("unreachable")  # pragma: no cover


async def post_json(
    session: aiohttp.ClientSession, url: str, body: bytes, headers: Mapping[str, str]
) -> tuple[int, bytes]:
    """A non-streamed POST whose whole answer the router needs (the PD prefill leg)."""
    try:
        async with await send(session, url, body, headers) as resp:
            data = await resp.read()
    except (TimeoutError, aiohttp.ClientConnectionError) as exc:
        raise UpstreamFailed(f"{type(exc).__name__}: {exc}", fatal=_is_fatal(exc)) from exc
    if resp.status >= 500:
        raise UpstreamFailed(f"HTTP {resp.status}", status=resp.status)
    return resp.status, data


async def forward(
    request: web.BaseRequest,
    session: aiohttp.ClientSession,
    url: str,
    body: bytes,
    headers: Mapping[str, str],
    *,
    request_id: str,
    clock: asyncio.AbstractEventLoop | None = None,
    on_first: Callable[[], None] | None = None,
    keep: list[bytes] | None = None,
) -> tuple[web.StreamResponse, RelayResult]:
    """POST ``body`` to ``url`` and relay the answer to ``request``'s client chunk by chunk.

    The client's response head goes out with the first body chunk, not before: an engine that dies between
    its own head and its first token has still sent the client nothing, so the request can be retried; so
    has one whose stream opens with a 5xx error event, after role-only chat chunks or none (``opening``).
    An event stream goes out in whole events (an event still arriving waits for its end), so a stream the
    upstream breaks ends at an event boundary; it is left open for the caller to end (``RelayResult.broken``).
    ``keep``: a list the bytes written to the client are appended to (``RelayResult.kept``)."""
    loop = clock or asyncio.get_running_loop()
    sent_at = loop.time()
    resp = await send(session, url, body, headers)
    try:
        if resp.status >= 500:
            await resp.read()
            raise UpstreamFailed(f"HTTP {resp.status}", status=resp.status)
        events = "event-stream" in resp.headers.get("content-type", "")
        held = b""
        try:
            if events:
                chunk, held = await read_events(resp.content, held)
                if resp.status == 200:
                    chunk, held = await past_opening(resp.content, chunk, held)
            else:
                chunk = await resp.content.readany()
        except (TimeoutError, aiohttp.ClientError, ConnectionResetError) as exc:
            raise UpstreamFailed(f"broke before the first byte: {type(exc).__name__}") from exc
        first = loop.time() - sent_at if chunk else None
        if first is not None and on_first is not None:
            on_first()
        out = web.StreamResponse(status=resp.status)
        for name in _KEEP_RESPONSE_HEADERS:
            if name in resp.headers:
                out.headers[name] = resp.headers[name]
        out.headers["x-request-id"] = request_id
        await out.prepare(request)
        relayed = 0
        while chunk:
            try:
                await out.write(chunk)
            except ConnectionResetError:  # the client went away: not the backend's failure
                resp.close()
                return out, RelayResult(resp.status, first, relayed, completed=False, client_gone=True)
            relayed += len(chunk)
            if keep is not None:
                keep.append(chunk)
                if relayed > MAX_KEPT_BYTES:
                    keep = None
            try:
                if events:
                    chunk, held = await read_events(resp.content, held)
                else:
                    chunk = await resp.content.readany()
            except (TimeoutError, aiohttp.ClientError, ConnectionResetError):
                # Upstream broke mid-stream: the client's response stays open for the caller to end (an
                # error event, a continuation) or cut (``cut``); never ended cleanly here (a chunked end or
                # a [DONE]-less clean close reads as success).
                resp.close()
                result = RelayResult(
                    resp.status, first, relayed, completed=False, kept=keep, appendable=events
                )
                return out, result
        await out.write_eof()
        return out, RelayResult(resp.status, first, relayed, completed=True)
    except BaseException:
        # Includes cancellation when the client disconnects: dropping the upstream connection is how the
        # engine learns to abort the request and free its KV blocks.
        resp.close()
        raise
    finally:
        resp.release()


async def past_opening(content: aiohttp.StreamReader, chunk: bytes, held: bytes) -> tuple[bytes, bytes]:
    """The stream's first whole events to relay (``chunk`` and, while those are role-only chat chunks, the
    events after them: ``opening``) and the start of the event after them; ``UpstreamFailed`` when the
    stream opens with an engine's 5xx error event."""
    while chunk:
        verdict = judge_opening(chunk, chunked=False)
        if isinstance(verdict, ErrorEvent):
            raise UpstreamFailed(verdict.reason, status=verdict.status)
        if verdict == "relay":
            break
        more, held = await read_events(content, held)
        if not more:
            break  # the stream ended there: relayed as it is
        chunk += more
    return chunk, held


async def read_events(content: aiohttp.StreamReader, held: bytes) -> tuple[bytes, bytes]:
    """The next whole server-sent events (after ``held``, the start of one read before) and the start of
    the event after them. At the end of the body: what was held, as it is, then b""."""
    while True:
        data = await content.readany()
        if not data:
            return held, b""
        if held:
            data = held + data
        end = _events_end(data)
        if end == len(data):
            return data, b""
        if end > 0:
            return data[:end], data[end:]
        held = data


def _events_end(data: bytes) -> int:
    """The index just past the last event separator (a blank line, LF or CRLF) in ``data``; 0: none."""
    lf, crlf = data.rfind(b"\n\n"), data.rfind(b"\r\n\r\n")
    return max(lf + 2 if lf >= 0 else 0, crlf + 4 if crlf >= 0 else 0)


def cut(request: ClientRequest, out: web.StreamResponse) -> None:
    """Abort the client's connection: the response it was reading ends without its terminator."""
    out.force_close()
    if request.transport is not None:
        request.transport.abort()


def _is_fatal(exc: BaseException) -> bool:
    return isinstance(exc, aiohttp.ClientConnectorError)
