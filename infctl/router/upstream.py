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

import aiohttp
from aiohttp import web

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


async def post_json(
    session: aiohttp.ClientSession, url: str, body: bytes, headers: Mapping[str, str]
) -> tuple[int, bytes]:
    """A non-streamed POST whose whole answer the router needs (the PD prefill leg)."""
    try:
        async with session.post(url, data=body, headers=headers) as resp:
            data = await resp.read()
    except (TimeoutError, aiohttp.ClientConnectionError) as exc:
        raise UpstreamFailed(f"{type(exc).__name__}: {exc}", fatal=_is_fatal(exc)) from exc
    if resp.status >= 500:
        raise UpstreamFailed(f"HTTP {resp.status}", status=resp.status)
    return resp.status, data


async def forward(
    request: web.Request,
    session: aiohttp.ClientSession,
    url: str,
    body: bytes,
    headers: Mapping[str, str],
    *,
    request_id: str,
    clock: asyncio.AbstractEventLoop | None = None,
    on_first: Callable[[], None] | None = None,
) -> tuple[web.StreamResponse, RelayResult]:
    """POST ``body`` to ``url`` and relay the answer to ``request``'s client chunk by chunk.

    The client's response head goes out with the first body chunk, not before: an engine that dies between
    its own head and its first token has still sent the client nothing, so the request can be retried."""
    loop = clock or asyncio.get_running_loop()
    sent_at = loop.time()
    try:
        resp = await session.post(url, data=body, headers=headers)
    except (TimeoutError, aiohttp.ClientConnectionError) as exc:
        raise UpstreamFailed(f"{type(exc).__name__}: {exc}", fatal=_is_fatal(exc)) from exc
    try:
        if resp.status >= 500:
            await resp.read()
            raise UpstreamFailed(f"HTTP {resp.status}", status=resp.status)
        try:
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
            try:
                chunk = await resp.content.readany()
            except (TimeoutError, aiohttp.ClientError, ConnectionResetError):
                # Upstream broke mid-stream: cut the client's connection too, never splice another stream
                # on nor end this one cleanly (a chunked end or a [DONE]-less clean close reads as success).
                resp.close()
                _cut(request, out)
                return out, RelayResult(resp.status, first, relayed, completed=False)
        await out.write_eof()
        return out, RelayResult(resp.status, first, relayed, completed=True)
    except BaseException:
        # Includes cancellation when the client disconnects: dropping the upstream connection is how the
        # engine learns to abort the request and free its KV blocks.
        resp.close()
        raise
    finally:
        resp.release()


def _cut(request: web.Request, out: web.StreamResponse) -> None:
    """Abort the client's connection: the response it was reading ends without its terminator."""
    out.force_close()
    if request.transport is not None:
        request.transport.abort()


def _is_fatal(exc: BaseException) -> bool:
    return isinstance(exc, aiohttp.ClientConnectorError)
