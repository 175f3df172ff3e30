"""A stream its backend broke after the client had part of it: continued on other backends from where it
stopped, or ended with an in-band error event, never left silently short. The rules (what can be continued,
the continuation's request, its events rewritten) are ``resume``'s; the client's open response and the
continuation's exchange, ``resume_relay``'s; each continuation is an ordinary try
(``attempt.try_once``).

Counted in the router's /metrics: ``broken_streams_total{outcome}`` (continued, finished, error_event, cut),
``stream_migrations_total`` (continuations sent) and ``stream_error_events_total{reason}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from aiohttp import web

from infctl.router import resume as rules
from infctl.router.attempt import DEFAULT_EXPECTED_OUTPUT, decide, try_once, without
from infctl.router.client import ClientRequest
from infctl.router.errors import NoBackendError
from infctl.router.pd_legs import openai_error
from infctl.router.requests import ESTIMATE, BadRequest, read_request_info
from infctl.router.resume import Rewriter, Sent, read_sent, uncontinuable
from infctl.router.resume_relay import ClientStream, Continuation
from infctl.router.snapshot import RequestInfo
from infctl.router.upstream import MAX_KEPT_BYTES, RelayResult, UpstreamFailed
from infctl.tokenization import TokenizerError

if TYPE_CHECKING:
    from infctl.router.state import RouterState

log = logging.getLogger(__name__)


async def _sent_tokens(state: RouterState, text: str, loop: asyncio.AbstractEventLoop) -> int:
    """Tokens of the text the client already has: in a worker thread when long for the tokenizer (an
    engine's ``/tokenize`` always is); the estimate's count when the tokenizer cannot answer (no engine
    answering ``/tokenize``), as the stream must be ended or continued either way."""
    tok = state.tokenizer
    try:
        if len(text) <= tok.off_loop_chars:
            return tok.count(text, special=False)
        return await loop.run_in_executor(None, functools.partial(tok.count, text, special=False))
    except TokenizerError:
        return ESTIMATE.count(text, special=False)


async def resume_broken(
    state: RouterState,
    request: ClientRequest,
    body: dict[str, Any],
    info: RequestInfo,
    out: web.StreamResponse,
    result: RelayResult,
    failed: str,
    tried: set[str],
    headers: Mapping[str, str],
    loop: asyncio.AbstractEventLoop,
) -> web.StreamResponse:
    """``failed`` broke this request's answer after the client had part of it. A stream goes on on another
    backend from where it stopped (``resume``), or ends with an in-band error event; never silently short.
    Anything else (a whole JSON answer, a stream ending in half an event) can only be cut."""
    metrics = state.metrics
    if not (info.is_stream and result.appendable):
        metrics.broken_streams["cut"] += 1
        return ClientStream(request, out).cut()
    chat = request.path.endswith("chat/completions")
    client = ClientStream(request, out)
    kept = result.kept
    sent = read_sent(kept, chunked=client.lean, chat=chat) if kept is not None else Sent()
    why = uncontinuable(body, chat=chat) or sent.obstacle
    if kept is None and why is None:
        why = f"it was longer than the {MAX_KEPT_BYTES} bytes kept to continue one"
    if not sent.whole:
        metrics.broken_streams["cut"] += 1
        return client.cut()
    tried.add(failed)
    cont = Continuation(client, Rewriter(sent, chat=chat))
    kind, n = "uncontinuable", 0
    while why is None:
        sent_tokens = await _sent_tokens(state, sent.text, loop)
        budget = rules.remaining_tokens(body, chat=chat, sent_tokens=sent_tokens)
        if sent.finished or (budget is not None and budget <= 0):
            # The generation had ended: only its closing events were lost.
            closing = rules.closing_events(
                sent,
                chat=chat,
                include_usage=rules.include_usage(body),
                prompt_tokens=info.prompt_tokens,
                sent_tokens=sent_tokens,
            )
            with contextlib.suppress(ConnectionResetError):
                await client.write(closing)
            metrics.broken_streams["finished"] += 1
            return await client.end()
        if n == state.cfg.max_attempts:
            kind, why = "failed", f"{n} continuations broke too"
            break
        n += 1
        cont.rewriter.sent_tokens = sent_tokens
        outcome = await continue_once(state, request, body, info, cont, n, sent_tokens, tried, headers, loop)
        if outcome == "done":
            metrics.broken_streams["continued"] += 1
            return await client.end()
        if outcome == "client_gone":
            return client.cut()
        if outcome != "broken":
            kind, why = ("refused" if cont.refusal else "no_backend"), outcome
    metrics.broken_streams["error_event"] += 1
    metrics.stream_error_events[kind] += 1
    tokens = await _sent_tokens(state, sent.text, loop)
    message = f"the stream broke after {tokens} tokens when its backend failed, and cannot go on: {why}"
    try:
        await client.write(rules.error_event(message))
    except ConnectionResetError:
        return client.cut()
    return await client.end()


async def continue_once(
    state: RouterState,
    request: ClientRequest,
    body: dict[str, Any],
    info: RequestInfo,
    cont: Continuation,
    n: int,
    sent_tokens: int,
    tried: set[str],
    headers: Mapping[str, str],
    loop: asyncio.AbstractEventLoop,
) -> str:
    """One continuation of ``body`` after ``cont.rewriter.sent``, on a backend not ``tried``: ``done``,
    ``broken`` (it broke too, after adding to the stream), ``client_gone``, or why it cannot go on."""
    chat = request.path.endswith("chat/completions")
    sent = cont.rewriter.sent
    new_body = rules.continuation_body(body, chat=chat, text=sent.text, sent_tokens=sent_tokens)
    rid = f"{info.request_id}-cont{n}"
    try:
        new_info = await read_request_info(
            new_body,
            chat=chat,
            loop=loop,
            request_id=rid,
            headers=request.headers,
            block_size=state.cfg.block_size,
            session_header=state.cfg.session_header,
            tokenizer=state.tokenizer,
            hashes=state.core.policy.index != "none",
            own_template=state.cfg.trust_request_chat_template,
        )
    except BadRequest as exc:
        return f"the continuation is not a valid request: {exc}"
    while True:
        snap = without(state.pool.snapshot(loop.time()), tried)
        try:
            prefill, decode, reason, matched = decide(state, snap, new_info, loop)
        except NoBackendError:
            return "no backend is left to continue it on"
        state.metrics.decisions[(state.policy_name, reason)] += 1
        state.metrics.stream_migrations += 1
        expected = new_info.max_tokens or DEFAULT_EXPECTED_OUTPUT
        cached = min(new_info.prompt_tokens, matched * new_info.block_size)
        payload = json.dumps(new_body).encode()
        send_headers = {**headers, "x-request-id": rid}
        try:
            _, result = await try_once(
                state, request, new_body, payload, send_headers, new_info, prefill, decode, expected,
                cached, loop, relay=cont.relay,
            )  # fmt: skip
        except UpstreamFailed as exc:
            failed = exc.backend or decode
            tried.add(failed)
            if state.pool.record_failure(failed, loop.time(), fatal=exc.fatal, error=exc.reason):
                state.metrics.ejections[failed] += 1
                log.warning("ejected %s after %s", failed, exc.reason)
            continue
        if result is None or cont.refusal is not None:
            status, answer = cont.refusal or (400, b"")
            message = (
                openai_error(status, answer)["error"]["message"] if answer else "a prefill leg refused it"
            )
            cont.refusal = cont.refusal or (status, answer)
            return f"the continuation was refused (HTTP {status}): {message}"
        if result.client_gone:
            return "client_gone"
        if result.completed:
            return "done"
        tried.add(decode)
        return "broken"
