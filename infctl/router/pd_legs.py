"""How a PD prefill leg's outcome is judged, and the parallel leg run beside its decode leg.

A prefill leg can end three ways besides success, and each has one right answer:

* the engine answered 4xx (unknown model, bad parameters): the client's mistake. It reaches the client as
  the engine said it, in the OpenAI error shape; no retry, no backend blamed (:class:`PrefillRejected`);
* it failed (connect error, 5xx, timeout, an answer the decode leg cannot use, such as vLLM's without
  ``kv_transfer_params``): ``UpstreamFailed`` naming the *prefill* backend, so the request is retried
  (another prefill, or a local prefill) and the prefill, not the healthy decode, counts the failure;
* in SGLang's parallel protocol it fails while the decode leg waits at the bootstrap rendezvous: the decode
  leg is cancelled at once (it would wait for KV that never comes, then fail with the decode blamed)
  unless it has already sent the client something, in which case its own outcome stands.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit

from aiohttp import web

from infctl.engines import PDEndpoint
from infctl.errors import EngineError
from infctl.router.upstream import UpstreamFailed

log = logging.getLogger(__name__)

T = TypeVar("T")
Leg = asyncio.Task[tuple[int, bytes]]
"""The parallel prefill leg: (status, body) of the prefill engine's answer (5xx raise UpstreamFailed)."""


class PrefillRejected(Exception):
    """The prefill engine answered 4xx: passed through to the client, never retried."""

    def __init__(self, status: int, body: bytes) -> None:
        super().__init__(f"prefill leg answered HTTP {status}")
        self.status = status
        self.body = body

    def response(self, request_id: str) -> web.Response:
        out = web.json_response(openai_error(self.status, self.body), status=self.status)
        out.headers["x-request-id"] = request_id
        return out


def openai_error(status: int, body: bytes) -> dict[str, Any]:
    """An engine's error body in the OpenAI shape (vLLM's already is; SGLang's is flat; text is wrapped)."""
    try:
        parsed = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError):
        parsed = None
    if isinstance(parsed, dict) and isinstance(parsed.get("error"), dict):
        return parsed
    if isinstance(parsed, dict) and "message" in parsed:
        message, kind, param = parsed["message"], parsed.get("type"), parsed.get("param")
    else:
        message, kind, param = body.decode("utf-8", "replace").strip(), None, None
    error = {"message": str(message), "type": kind or "BadRequestError", "param": param, "code": status}
    return {"error": error}


def prefill_answer(prefill_id: str, status: int, body: bytes) -> dict[str, Any]:
    """The sequential prefill leg's answer as the decode leg needs it, judged (see the module docstring)."""
    if status >= 400:
        raise PrefillRejected(status, body)
    try:
        answer = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError):
        answer = None
    if not isinstance(answer, dict):
        raise UpstreamFailed(f"prefill answered HTTP {status} without a JSON object", backend=prefill_id)
    return answer


def decode_body_or_blame(prefill_id: str, build: Callable[[], T]) -> T:
    """``build()`` (the adapter's decode body); an ``EngineError`` there is the prefill answer's fault."""
    try:
        return build()
    except EngineError as exc:
        raise UpstreamFailed(f"unusable prefill answer: {exc}", backend=prefill_id) from exc


async def beside(
    decode: Awaitable[T],
    leg: Leg,
    prefill_id: str,
    *,
    started: Callable[[], bool],
    background: set[asyncio.Task[Any]],
) -> T:
    """Await the decode leg while the parallel prefill ``leg`` runs. ``started()``: whether the decode
    leg has sent the client anything (then nothing may be retried and its outcome stands)."""
    relay = asyncio.ensure_future(decode)
    try:
        await asyncio.wait((relay, leg), return_when=asyncio.FIRST_COMPLETED)
        if not relay.done() and not started():
            failure = _failure(leg, prefill_id)
            if failure is not None:
                relay.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await relay
                raise failure
        try:
            return await relay
        except UpstreamFailed as exc:
            # A decode that failed because its prefill did (it learns at the rendezvous): the prefill's
            # outcome is the request's (blamed on the prefill, or the client's 4xx).
            failure = _failure(leg, prefill_id)
            if failure is not None:
                raise failure from exc
            raise
    finally:
        dropped = not relay.done() or relay.cancelled() or relay.exception() is not None
        if not relay.done():  # our caller was cancelled (the client went away)
            relay.cancel()
            relay.add_done_callback(_read)
        _settle(leg, prefill_id, dropped, background)


def _failure(leg: Leg, prefill_id: str) -> Exception | None:
    """What a finished prefill leg says about the request: None when it succeeded (or is still running)."""
    if not leg.done() or leg.cancelled():
        return None
    exc = leg.exception()
    if isinstance(exc, UpstreamFailed):
        exc.backend = prefill_id
        return exc
    if exc is not None:
        return UpstreamFailed(f"prefill leg: {type(exc).__name__}: {exc}", backend=prefill_id)
    status, body = leg.result()
    return PrefillRejected(status, body) if status >= 400 else None


def _settle(leg: Leg, prefill_id: str, dropped: bool, background: set[asyncio.Task[Any]]) -> None:
    """Never leave the leg's outcome unread. A decode leg that failed or was ``dropped`` has no use for
    the prefill's KV: cancel that leg too (closing its connection makes the engine free the blocks)."""
    if not leg.done():
        if dropped:
            leg.cancel()
        background.add(leg)
        leg.add_done_callback(background.discard)
    leg.add_done_callback(lambda t: _log_late(t, prefill_id))


def _read(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


def _log_late(leg: Leg, prefill_id: str) -> None:
    if not leg.cancelled() and (exc := leg.exception()) is not None:
        log.debug("prefill leg on %s ended with %s after its decode leg", prefill_id, exc)


def pd_endpoint(url: str, bootstrap_port: int | None = None) -> PDEndpoint:
    """The prefill engine's host and port from its backend URL, for the decode leg: the host bare (an IPv6
    address without its brackets), the port the URL's or its scheme's default (80, 443 for https), and the
    backend's own ``bootstrap_port`` (``Backend.bootstrap_port``; None: the engine's default)."""
    parts = urlsplit(url)
    if not parts.hostname:
        raise ValueError(f"{url!r} is not a backend URL such as http://10.0.0.5:8000")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return PDEndpoint(host=parts.hostname, port=port, bootstrap_port=bootstrap_port)
