"""One try of one request on one backend: the routing decision (pure core), the PD prefill leg when there is
one, the relay of the answer, and the accounting (pool load, failures, metrics) whichever way it ends."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from aiohttp import web

from infctl.router.client import ClientRequest
from infctl.router.legs import pd_payload
from infctl.router.pd_batch import prefill_each, sample_count, split_batch
from infctl.router.pd_batch_relay import BatchRelay
from infctl.router.pd_legs import Leg, PrefillRejected, beside
from infctl.router.ranks import rank_pin
from infctl.router.relay import forward_lean, lean_capable
from infctl.router.snapshot import Backend, RequestInfo, Snapshot
from infctl.router.upstream import RelayResult, UpstreamFailed, forward

if TYPE_CHECKING:
    from infctl.router.state import RouterState

log = logging.getLogger(__name__)

DEFAULT_EXPECTED_OUTPUT = 128
"""Expected output when the client does not say: only used to weigh decode load, never sent upstream."""

Relay = Callable[
    [
        "RouterState",
        ClientRequest,
        str,
        bytes,
        Mapping[str, str],
        str,
        Callable[[], None],
        "list[bytes] | None",
    ],
    Awaitable[tuple[web.StreamResponse, RelayResult]],
]
"""Sends a request and relays its answer: (state, request, url, payload, headers, request id, on_first,
keep)."""


LEARN_FIRST_BLOCKS = 16
"""Leading blocks of a prompt the prefix index learns right after dispatch (one run of the hash memo)."""
LEARN_REST_AFTER_S = 0.01
"""When the rest of a long prompt's blocks are learnt (seconds after dispatch)."""


def decide(
    state: RouterState, snap: Snapshot, info: RequestInfo, loop: asyncio.AbstractEventLoop
) -> tuple[str | None, str, str, int]:
    """(prefill or None, decode/target, reason, matched blocks) from the pure core."""
    if state.disaggregated:
        pd = state.core.route_pd(snap, info, state.pd_settings)
        return pd.prefill, pd.decode, pd.reason, 0
    d = state.core.decide(snap, info)
    if state.core.learns(info):
        # Learning the prefix index costs ~0.5 ms on a long prompt (hashing its every block, recording them):
        # not in front of its TTFT. Its leading blocks are learnt once the request is on its way (the client
        # sends the body from a task that starts on the next loop iteration, so one iteration more: requests
        # decided in between may not see them, a microsecond window): enough to steer the next request with
        # this prefix here. The rest a few milliseconds later, once the answer is likely under way.
        learn = functools.partial(state.core.learn, snap, info, d.backend_id)
        if len(info.block_hashes) <= LEARN_FIRST_BLOCKS:
            loop.call_soon(loop.call_soon, learn)
        else:
            loop.call_soon(loop.call_soon, functools.partial(learn, first=LEARN_FIRST_BLOCKS))
            loop.call_later(LEARN_REST_AFTER_S, learn)
    return None, d.backend_id, d.reason, d.matched_blocks


async def try_once(
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
    keep: list[bytes] | None = None,
    relay: Relay | None = None,
) -> tuple[web.StreamResponse, RelayResult | None]:
    """One try on ``decode``: the response and what the relay saw (None for the router's own answer to a
    prefill leg's 4xx). ``cached``: prompt tokens the router expects the engine to hold; the rest counts as
    the backend's queued prefill until the first token arrives. ``keep``: the relay keeps the body bytes it
    writes there (``RelayResult.kept``); ``relay``: what sends the request and relays the answer (default
    ``relay_answer``; a continuation's appends to a stream already open)."""
    relay = relay or relay_answer
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
        parts = split_batch(state, prefill, body) if prefill is not None else None
        if prefill is None:
            # Forwarded byte for byte unless the pin is a body field (SGLang's data_parallel_rank).
            payload = json.dumps({**body, **pin.body}).encode() if pin.body else raw
        elif parts is not None:
            # A batch the sequential protocol cannot carry: one PD request per prompt, merged (pd_batch).
            legs = await prefill_each(state, parts, headers, prefill, pin, info.prompt_tokens)
            relay, payload = BatchRelay(legs, sample_count(body), stream=info.is_stream).relay, b""
        else:
            payload, leg = await pd_payload(state, body, headers, prefill, pin, info.prompt_tokens)
        url, rid = backend.url + request.path, info.request_id
        sent_at = loop.time()
        if leg is not None:
            assert prefill is not None
            out, result = await beside(
                relay(state, request, url, payload, send_headers, rid, on_first, keep),
                leg,
                prefill,
                started=lambda: got_first,
                background=state.background,
            )
        else:
            out, result = await relay(state, request, url, payload, send_headers, rid, on_first, keep)
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
        return out, result
    except PrefillRejected as exc:
        # The client's mistake, caught by the prefill engine: its answer, as a proxied one would be.
        state.metrics.requests[(prefill or decode, f"{exc.status // 100}xx")] += 1
        return exc.response(info.request_id), None
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
        state.metrics.observe_upstream(upstream_of(state, exc.backend, backend), status, None)
        raise
    finally:
        pool.finish(decode, info.prompt_tokens, expected, got_first=got_first, cached_tokens=cached)


async def relay_answer(
    state: RouterState,
    request: ClientRequest,
    url: str,
    payload: bytes,
    send_headers: Mapping[str, str],
    rid: str,
    on_first: Callable[[], None],
    keep: list[bytes] | None,
) -> tuple[web.StreamResponse, RelayResult]:
    """Send the (decode) request and relay its answer to the client: the lean front's through the lean
    client, which writes to the client's socket itself; aiohttp's through aiohttp's client and its response
    API (the only public way to answer on a connection aiohttp's server owns)."""
    if isinstance(request, web.BaseRequest):
        return await forward(
            request, state.session, url, payload, send_headers, request_id=rid, on_first=on_first, keep=keep
        )
    if state.http1 is not None and lean_capable(url, request):
        return await forward_lean(
            request, state.http1, url, payload, send_headers, request_id=rid, on_first=on_first, keep=keep
        )
    # the lean front hands a request to aiohttp's when it cannot go lean: a backend added since
    raise UpstreamFailed(f"{url}: not reachable from the lean front (HTTP/1.1 over plain HTTP only)")


def upstream_of(state: RouterState, backend_id: str | None, default: Backend) -> str:
    """The upstream group of ``backend_id`` (``default``'s when None, or when it has left the pool)."""
    if backend_id is None or backend_id == default.id or backend_id not in state.pool:
        return default.upstream
    return state.pool.backend(backend_id).upstream


def without(snap: Snapshot, tried: set[str]) -> Snapshot:
    if not tried:
        return snap
    backends = tuple(replace(b, draining=True) if b.id in tried else b for b in snap.backends)
    return Snapshot(backends=backends, states=snap.states, now=snap.now)
