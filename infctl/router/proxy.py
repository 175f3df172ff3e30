"""The per-request path: read, decide, forward, relay, account. Decisions come from RouterCore (pure)."""

from __future__ import annotations

import asyncio
import logging
import math
import random
from typing import TYPE_CHECKING, Any

from aiohttp import web

from infctl.router.admission import Deadline, QueueFull, classify, empty, saturated
from infctl.router.attempt import DEFAULT_EXPECTED_OUTPUT, decide, try_once, without
from infctl.router.client import ClientRequest
from infctl.router.errors import NoBackendError
from infctl.router.legs import mirror
from infctl.router.migrate import resume_broken
from infctl.router.requests import BadRequest, error_response, parse_body, read_body, read_request_info
from infctl.router.snapshot import RequestInfo, Snapshot
from infctl.router.upstream import UpstreamFailed, upstream_headers

if TYPE_CHECKING:
    from infctl.router.state import RouterState

log = logging.getLogger(__name__)

# Request ids need to be unique, not secret: uuid4 reads the OS's random source on every call, a system
# call in front of every request's TTFT; this generator is seeded from it once.
_ids = random.Random()


async def generate(state: RouterState, request: ClientRequest, *, path: str) -> web.StreamResponse:
    """Route one /v1/completions or /v1/chat/completions request (from either front: aiohttp or lean).
    While the router drains, new requests get a 503 (load balancers move away); in-flight ones finish."""
    if state.draining:
        state.metrics.rejected["draining"] += 1
        resp = error_response(503, "the router is shutting down", kind="ServiceUnavailableError")
        return _own(resp, request.headers.get("x-request-id"))
    state.inflight += 1
    try:
        # Asked once and handed down: on Python 3.11 each get_running_loop() is a getpid() system call.
        out = await _generate(state, request, path, asyncio.get_running_loop())
        if state.handing_over:
            out.force_close()  # a successor listens: the client's next request goes there
        return out
    finally:
        state.inflight -= 1
        if not state.inflight:
            state.idle.set()


async def _generate(
    state: RouterState, request: ClientRequest, path: str, loop: asyncio.AbstractEventLoop
) -> web.StreamResponse:
    request_id = request.headers.get("x-request-id") or f"{_ids.getrandbits(128):032x}"
    try:
        raw = await read_body(request, state.cfg.body_timeout_s)
        body = parse_body(raw)
        info = await read_request_info(
            body,
            chat=path.endswith("chat/completions"),
            loop=loop,
            estimate=state.estimating.plan(state.core, state.pd_settings if state.disaggregated else None),
            request_id=request_id,
            headers=request.headers,
            block_size=state.cfg.block_size,
            session_header=state.cfg.session_header,
            tokenizer=state.tokenizer,
            hashes=state.core.policy.index != "none",
            max_prompt_chars=state.cfg.max_prompt_chars,
            own_template=state.cfg.trust_request_chat_template,
        )
    except BadRequest as exc:
        state.metrics.rejected["bad_request"] += 1
        return _own(error_response(exc.status, str(exc)), request_id)
    except web.HTTPRequestEntityTooLarge as exc:  # aiohttp's front enforces max_body_bytes in read()
        state.metrics.rejected["body_too_large"] += 1
        return _own(error_response(413, exc.text or "request body too large"), request_id)
    except TimeoutError:
        state.metrics.rejected["read_timeout"] += 1
        late = error_response(408, f"the request body did not arrive within {state.cfg.body_timeout_s:g} s")
        late.force_close()  # the rest of a late body must not be read as the next request
        return _own(late, request_id)
    started = loop.time()
    snap = state.pool.snapshot(started)
    policy = state.core.policy
    admission = classify(policy.buckets, info.prompt_tokens, state.cfg.short_prompt_tokens)
    scope = admission.scope
    # Scale-to-zero: no backend can take it yet; wait for one to appear rather than answer 503 now.
    hold = state.cfg.hold_when_empty_s if state.cfg.hold_when_empty_s > 0 and empty(snap, scope) else None
    try:
        waited = await state.admission.admit(
            admission.priority,
            saturated_now=hold is not None or saturated(snap, policy.settings, scope),
            scope=scope,
            hold_s=hold,
        )
    except (QueueFull, Deadline) as exc:
        if hold is None or isinstance(exc, QueueFull) or empty(state.pool.snapshot(loop.time())):
            return _own(_refusal(state, exc, hold), request_id)
        waited = True  # its own pools did not wake in time; others take it, as without holding
    try:
        # Without a wait the snapshot taken for admission is still current: route on it.
        return await _route(state, request, body, raw, info, started, None if waited else snap, loop)
    finally:
        state.admission.wake()
        # Counted once the answer is out: a count overlapping its own request's first token added ~1 ms
        # to it (a no-op unless the tokenizer is exact).
        state.estimating.count_later(loop, body, path.endswith("chat/completions"), info)


async def _route(
    state: RouterState,
    request: ClientRequest,
    body: dict[str, Any],
    raw: bytes,
    info: RequestInfo,
    started: float,
    first: Snapshot | None,
    loop: asyncio.AbstractEventLoop,
) -> web.StreamResponse:
    if not info.estimated:  # an estimated one is added when counted exactly (``Estimating``)
        state.metrics.prompt_tokens += info.prompt_tokens
    headers = upstream_headers(request.headers, info.request_id)
    expected = info.max_tokens or DEFAULT_EXPECTED_OUTPUT
    tried: set[str] = set()
    suspect: str | None = None  # a prefill whose KV its decode could not load (``_transfer_failed``)
    last_error = "no attempt"
    for attempt in range(state.cfg.max_attempts):
        current = first if attempt == 0 and first is not None else state.pool.snapshot(loop.time())
        snap = without(current, tried)
        try:
            prefill, decode, reason, matched = decide(state, snap, info, loop)
        except NoBackendError as exc:
            if tried:
                break  # every backend left has failed this request
            state.metrics.rejected[exc.reason] += 1
            return _own(error_response(503, exc.message, kind="ServiceUnavailableError"), info.request_id)
        state.metrics.decisions[(state.policy_name, reason)] += 1
        if attempt == 0:
            state.metrics.estimated_cached_tokens += matched * info.block_size
            mirror(state, snap, info, request.path, raw, headers)
        else:
            state.metrics.retries += 1
        try:
            cached = min(info.prompt_tokens, matched * info.block_size)
            # A stream's bytes are kept as they pass (no parsing): if its backend breaks it, they tell
            # where the continuation starts.
            keep: list[bytes] | None = [] if info.is_stream else None
            out, result = await try_once(
                state, request, body, raw, headers, info, prefill, decode, expected, cached, loop, keep
            )
            if result is not None and result.broken:
                out = await resume_broken(
                    state, request, body, info, out, result, decode, tried, headers, loop
                )
        except asyncio.CancelledError:
            state.metrics.e2e.observe(loop.time() - started)  # the client went away: still a request served
            raise
        except UpstreamFailed as exc:
            failed = exc.backend or decode
            last_error = f"{failed}: {exc.reason}"
            if suspect is None and prefill is not None and _transfer_failed(exc, failed, decode):
                # Retried without that prefill (another, or the decode prefilling itself); the decode is
                # blamed only if it fails again, the prefill once the request succeeds without it.
                suspect = prefill
                tried.add(prefill)
                state.metrics.pd_transfer_failures[(prefill, decode)] += 1
                continue
            tried.add(failed)
            _blame(state, failed, exc.reason, fatal=exc.fatal, now=loop.time())
            continue
        if suspect is not None and result is not None and result.completed and result.status < 500:
            why = f"a decode could not load its KV ({last_error})"
            _blame(state, suspect, why, fatal=False, now=loop.time())
        state.metrics.e2e.observe(loop.time() - started)
        return out
    state.metrics.rejected["upstream_failed"] += 1
    resp = error_response(502, f"all attempts failed; last: {last_error}", kind="BadGatewayError")
    return _own(resp, info.request_id)


def _transfer_failed(exc: UpstreamFailed, failed: str, decode: str) -> bool:
    """Whether a PD try's failure may be its KV transfer's: the decode leg answered 5xx (not a connect
    error) after the prefill leg succeeded. vLLM's decode answers 500 when it cannot load the KV
    (``kv_load_failure_policy`` ``fail``, its default), as when the prefill engine died after answering."""
    return failed == decode and not exc.fatal and exc.status is not None and exc.status >= 500


def _blame(state: RouterState, backend: str, error: str, *, fatal: bool, now: float) -> None:
    if state.pool.record_failure(backend, now, fatal=fatal, error=error):
        state.metrics.ejections[backend] += 1
        log.warning("ejected %s after %s", backend, error)


def _refusal(state: RouterState, exc: QueueFull | Deadline, hold: float | None) -> web.Response:
    if hold is not None and isinstance(exc, Deadline):
        state.metrics.rejected["no_backend_after_hold"] += 1
        why = f"no backend appeared within {hold:g} s (its pool is scaled to zero and did not wake)"
        resp = error_response(503, why, kind="ServiceUnavailableError")
        resp.headers["retry-after"] = str(max(1, math.ceil(hold)))
        return resp
    reason = "admission_full" if isinstance(exc, QueueFull) else "admission_deadline"
    state.metrics.rejected[reason] += 1
    resp = error_response(429, f"all backends are saturated ({reason})", kind="RateLimitError")
    resp.headers["retry-after"] = str(state.admission.retry_after_s())
    return resp


def _own(resp: web.Response, request_id: str | None) -> web.Response:
    """The router's own answer, carrying the request's id like every proxied one."""
    if request_id:
        resp.headers["x-request-id"] = request_id
    return resp
