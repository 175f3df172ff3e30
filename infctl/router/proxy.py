"""The per-request path: read, decide, forward, relay, account. Decisions come from RouterCore (pure)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from aiohttp import web

from infctl.engines import RankPin, get_adapter, new_bootstrap_room
from infctl.router.admission import Deadline, QueueFull, classify, saturated
from infctl.router.errors import NoBackendError
from infctl.router.fetch import post_whole
from infctl.router.pd_legs import (
    Leg,
    PrefillRejected,
    beside,
    decode_body_or_blame,
    pd_endpoint,
    prefill_answer,
)
from infctl.router.policies.weights import mirror_target, shadow_backend
from infctl.router.ranks import rank_pin
from infctl.router.relay import ClientRequest, forward_lean, lean_capable
from infctl.router.requests import BadRequest, error_response, parse_body, read_body, read_request_info
from infctl.router.snapshot import Backend, RequestInfo, Snapshot
from infctl.router.upstream import RelayResult, UpstreamFailed, forward, post_json, upstream_headers

if TYPE_CHECKING:
    from infctl.router.server import RouterState

log = logging.getLogger(__name__)

# Expected output when the client does not say: only used to weigh decode load, never sent upstream.
_DEFAULT_EXPECTED_OUTPUT = 128
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
        return await _generate(state, request, path, asyncio.get_running_loop())
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
            request_id=request_id,
            headers=request.headers,
            block_size=state.cfg.block_size,
            session_header=state.cfg.session_header,
            tokenizer=state.tokenizer,
            hashes=state.core.policy.index != "none",
            max_prompt_chars=state.cfg.max_prompt_chars,
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
    try:
        waited = await state.admission.admit(
            admission.priority, saturated_now=saturated(snap, policy.settings, scope), scope=scope
        )
    except (QueueFull, Deadline) as exc:
        reason = "admission_full" if isinstance(exc, QueueFull) else "admission_deadline"
        state.metrics.rejected[reason] += 1
        resp = error_response(429, f"all backends are saturated ({reason})", kind="RateLimitError")
        resp.headers["retry-after"] = str(state.admission.retry_after_s())
        return _own(resp, request_id)
    try:
        # Without a wait the snapshot taken for admission is still current: route on it.
        return await _route(state, request, body, raw, info, started, None if waited else snap, loop)
    finally:
        state.admission.wake()


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
    state.metrics.prompt_tokens += info.prompt_tokens
    headers = upstream_headers(request.headers, info.request_id)
    expected = info.max_tokens or _DEFAULT_EXPECTED_OUTPUT
    tried: set[str] = set()
    last_error = "no attempt"
    for attempt in range(state.cfg.max_attempts):
        current = first if attempt == 0 and first is not None else state.pool.snapshot(loop.time())
        snap = _without(current, tried)
        try:
            prefill, decode, reason, matched = _decide(state, snap, info, loop)
        except NoBackendError as exc:
            if tried:
                break  # every backend left has failed this request
            state.metrics.rejected[exc.reason] += 1
            return _own(error_response(503, exc.message, kind="ServiceUnavailableError"), info.request_id)
        state.metrics.decisions[(state.policy_name, reason)] += 1
        if attempt == 0:
            state.metrics.estimated_cached_tokens += matched * info.block_size
            _mirror(state, snap, info, request.path, raw, headers)
        else:
            state.metrics.retries += 1
        try:
            cached = min(info.prompt_tokens, matched * info.block_size)
            out = await _attempt(
                state, request, body, raw, headers, info, prefill, decode, expected, cached, loop
            )
        except asyncio.CancelledError:
            state.metrics.e2e.observe(loop.time() - started)  # the client went away: still a request served
            raise
        except UpstreamFailed as exc:
            failed = exc.backend or decode
            tried.add(failed)
            last_error = f"{failed}: {exc.reason}"
            if state.pool.record_failure(failed, loop.time(), fatal=exc.fatal, error=exc.reason):
                state.metrics.ejections[failed] += 1
                log.warning("ejected %s after %s", failed, exc.reason)
            continue
        state.metrics.e2e.observe(loop.time() - started)
        return out
    state.metrics.rejected["upstream_failed"] += 1
    resp = error_response(502, f"all attempts failed; last: {last_error}", kind="BadGatewayError")
    return _own(resp, info.request_id)


def _own(resp: web.Response, request_id: str | None) -> web.Response:
    """The router's own answer, carrying the request's id like every proxied one."""
    if request_id:
        resp.headers["x-request-id"] = request_id
    return resp


def _decide(
    state: RouterState, snap: Snapshot, info: RequestInfo, loop: asyncio.AbstractEventLoop
) -> tuple[str | None, str, str, int]:
    """(prefill or None, decode/target, reason, matched blocks) from the pure core."""
    if state.disaggregated:
        pd = state.core.route_pd(snap, info, state.pd_settings)
        return pd.prefill, pd.decode, pd.reason, 0
    d = state.core.decide(snap, info)
    if state.core.learns(info):
        # Learning the prefix index costs ~0.2 ms on long prompts: do it once this request is on its way,
        # not in front of its TTFT. The client sends the body from a task that starts on the next loop
        # iteration, so learning waits one iteration more (requests decided in between may not see it: a
        # microsecond window).
        loop.call_soon(loop.call_soon, state.core.learn, snap, info, d.backend_id)
    return None, d.backend_id, d.reason, d.matched_blocks


def _mirror(
    state: RouterState, snap: Snapshot, info: RequestInfo, path: str, raw: bytes, headers: Mapping[str, str]
) -> None:
    """Copy the request to the shadow group when the upstream config says so. The copy runs in the
    background and its answer is discarded: the client never waits for it and never sees it fail."""
    cfg = state.core.policy.upstreams
    group = mirror_target(info.request_id, cfg) if cfg else None
    if group is None:
        return
    target_id = shadow_backend(snap, group)
    if target_id is None:
        return
    target = snap.by_id[target_id]
    state.metrics.mirrored += 1

    async def send() -> None:
        with contextlib.suppress(UpstreamFailed):
            await _post(state, target.url + path, raw, headers)

    task = asyncio.create_task(send())
    state.background.add(task)
    task.add_done_callback(state.background.discard)


async def _attempt(
    state: RouterState,
    request: ClientRequest,
    body: dict[str, Any],
    raw: bytes,
    headers: Mapping[str, str],
    info: RequestInfo,
    prefill: str | None,
    decode: str,
    expected: int,
    cached: int,
    loop: asyncio.AbstractEventLoop,
) -> web.StreamResponse:
    """One try on ``decode``. ``cached``: prompt tokens the router expects the engine to hold; the rest
    counts as the backend's queued prefill until the first token arrives."""
    pool = state.pool
    backend = pool.backend(decode)
    pin = rank_pin(backend, state.cfg.engine)
    send_headers = {**headers, **pin.headers} if pin.headers else headers
    pool.start(decode, info.prompt_tokens, expected, cached_tokens=cached)
    got_first = False
    sent_at = first_at = loop.time()

    def on_first() -> None:
        # At the first token, not at the end of the stream: the prefill is no longer queued work.
        nonlocal got_first, first_at
        got_first, first_at = True, loop.time()
        pool.first_token(decode, info.prompt_tokens, cached_tokens=cached)

    leg: Leg | None = None
    try:
        if prefill is None:
            # Forwarded byte for byte unless the pin is a body field (SGLang's data_parallel_rank).
            payload = json.dumps({**body, **pin.body}).encode() if pin.body else raw
        else:
            payload, leg = await _pd_payload(state, body, headers, prefill, pin, info.prompt_tokens)
        url, rid = backend.url + request.path, info.request_id
        sent_at = loop.time()
        if leg is not None:
            assert prefill is not None
            out, result = await beside(
                _relay(state, request, url, payload, send_headers, rid, on_first),
                leg,
                prefill,
                started=lambda: got_first,
                background=state.background,
            )
        else:
            out, result = await _relay(state, request, url, payload, send_headers, rid, on_first)
        if result.first_byte_s is not None:
            state.metrics.ttft.observe(result.first_byte_s)
        if result.completed:
            status = f"{result.status // 100}xx"
        else:
            status = "client_gone" if result.client_gone else "broken"
        state.metrics.requests[(decode, status)] += 1
        state.metrics.observe_upstream(backend.upstream, status, result.first_byte_s)
        if result.completed and result.status < 500:
            pool.record_success(decode)
        elif status == "broken" and pool.record_failure(
            decode, loop.time(), fatal=False, error="stream broken"
        ):
            state.metrics.ejections[decode] += 1
            log.warning("ejected %s after a broken stream", decode)
        return out
    except PrefillRejected as exc:
        # The client's mistake, caught by the prefill engine: its answer, as a proxied one would be.
        state.metrics.requests[(prefill or decode, f"{exc.status // 100}xx")] += 1
        return exc.response(info.request_id)
    except asyncio.CancelledError:
        # The client went away (the server cancels its handler): count it, as a relay that noticed would.
        if got_first:
            state.metrics.ttft.observe(first_at - sent_at)
        state.metrics.requests[(decode, "client_gone")] += 1
        state.metrics.observe_upstream(
            backend.upstream, "client_gone", first_at - sent_at if got_first else None
        )
        raise
    except UpstreamFailed as exc:
        # The client never sees this answer (it is retried elsewhere or becomes the router's 502), but a
        # cutover gate comparing groups must: count it against the group that failed it (a PD prefill
        # leg's failure names the prefill backend, whose group may not be the decode's).
        status = f"{exc.status // 100}xx" if exc.status else "failed"
        state.metrics.observe_upstream(_upstream_of(state, exc.backend, backend), status, None)
        raise
    finally:
        pool.finish(decode, info.prompt_tokens, expected, got_first=got_first, cached_tokens=cached)


async def _relay(
    state: RouterState,
    request: ClientRequest,
    url: str,
    payload: bytes,
    send_headers: Mapping[str, str],
    rid: str,
    on_first: Callable[[], None],
) -> tuple[web.StreamResponse, RelayResult]:
    """Send the (decode) request and relay its answer to the client, on the lean client when it can."""
    if state.http1 is not None and lean_capable(url, request):
        return await forward_lean(
            request, state.http1, url, payload, send_headers, request_id=rid, on_first=on_first
        )
    if isinstance(request, web.Request):
        return await forward(
            request, state.session, url, payload, send_headers, request_id=rid, on_first=on_first
        )
    # the lean front hands a request to aiohttp's when it cannot go lean: a backend added since
    raise UpstreamFailed(f"{url}: not reachable from the lean front (HTTP/1.1 over plain HTTP only)")


async def _pd_payload(
    state: RouterState,
    body: dict[str, Any],
    headers: Mapping[str, str],
    prefill_id: str,
    decode_pin: RankPin,
    prompt_tokens: int,
) -> tuple[bytes, Leg | None]:
    """Run the PD protocol's prefill side; return the decode leg's body (adapter-defined wire format) and,
    for the parallel protocol, the prefill leg still running (judged beside the decode: ``pd_legs``).
    Each leg is pinned to its own backend's rank: the prefill's never carries the decode's.

    The prefill leg counts as in flight on the prefill backend (its prompt as queued prefill work) from
    its send until it ends, whichever way (answer, error, the client gone): without it, a burst between
    two scrapes sees every prefill engine idle and piles onto one."""
    pool = state.pool
    prefill = pool.backend(prefill_id)
    adapter = get_adapter(prefill.engine or state.cfg.engine)
    pin = rank_pin(prefill, state.cfg.engine)
    headers = {**headers, **pin.headers} if pin.headers else headers
    endpoint = pd_endpoint(prefill.url, prefill.bootstrap_port)
    path = "/v1/chat/completions" if "messages" in body else "/v1/completions"
    if adapter.pd_style == "sequential":
        leg = {**adapter.prefill_body(body, endpoint), **pin.body}
        pool.start_prefill_leg(prefill_id, prompt_tokens)
        try:
            status, data = await _post(state, prefill.url + path, json.dumps(leg).encode(), headers)
        except UpstreamFailed as exc:
            exc.backend = prefill_id  # blame the prefill leg, not the decode backend
            raise
        finally:
            pool.finish_prefill_leg(prefill_id, prompt_tokens)
        answer = prefill_answer(prefill_id, status, data)
        decode_leg = decode_body_or_blame(prefill_id, lambda: adapter.decode_body(body, answer, endpoint))
        pool.record_success(prefill_id)  # ends its failure streak, as a served request does on decode
        return json.dumps({**decode_leg, **decode_pin.body}).encode(), None
    room = new_bootstrap_room()
    leg = {**adapter.prefill_body(body, endpoint, room), **pin.body}
    payload = json.dumps({**adapter.decode_body(body, None, endpoint, room), **decode_pin.body}).encode()
    pool.start_prefill_leg(prefill_id, prompt_tokens)
    task = asyncio.create_task(_post(state, prefill.url + path, json.dumps(leg).encode(), headers))

    def ended(leg: asyncio.Task[tuple[int, bytes]]) -> None:
        # Released when the leg ends: answered, failed, or cancelled with its decode leg (``pd_legs.beside``).
        pool.finish_prefill_leg(prefill_id, prompt_tokens)
        if not leg.cancelled() and leg.exception() is None and leg.result()[0] < 400:
            pool.record_success(prefill_id)  # ends its failure streak (failures are judged in pd_legs)

    task.add_done_callback(ended)
    return payload, task


def _upstream_of(state: RouterState, backend_id: str | None, default: Backend) -> str:
    """The upstream group of ``backend_id`` (``default``'s when None, or when it has left the pool)."""
    if backend_id is None or backend_id == default.id or backend_id not in state.pool:
        return default.upstream
    return state.pool.backend(backend_id).upstream


async def _post(state: RouterState, url: str, body: bytes, headers: Mapping[str, str]) -> tuple[int, bytes]:
    """A non-streamed POST (PD prefill leg, mirrored copy) on the lean client when it can take it."""
    if state.http1 is not None and url.startswith("http://"):
        return await post_whole(state.http1, url, body, headers)
    return await post_json(state.session, url, body, headers)


def _without(snap: Snapshot, tried: set[str]) -> Snapshot:
    if not tried:
        return snap
    backends = tuple(replace(b, draining=True) if b.id in tried else b for b in snap.backends)
    return Snapshot(backends=backends, states=snap.states, now=snap.now)
