"""The requests the proxy sends beside the client's own: a PD request's prefill leg and a mirrored copy, both
non-streamed POSTs whose answers the router reads whole."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from infctl.engines import RankPin, get_adapter, new_bootstrap_room
from infctl.router.fetch import post_whole
from infctl.router.pd_legs import Leg, decode_body_or_blame, pd_endpoint, prefill_answer
from infctl.router.policies.weights import mirror_target, shadow_backend
from infctl.router.ranks import rank_pin
from infctl.router.requests import prompts
from infctl.router.snapshot import RequestInfo, Snapshot
from infctl.router.upstream import UpstreamFailed, post_json

if TYPE_CHECKING:
    from infctl.router.state import RouterState


def mirror(
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
            await post(state, target.url + path, raw, headers)

    task = asyncio.create_task(send())
    state.background.add(task)
    task.add_done_callback(state.background.discard)


async def pd_payload(
    state: RouterState,
    body: dict[str, Any],
    headers: Mapping[str, str],
    prefill_id: str,
    decode_pin: RankPin,
    prompt_tokens: int,
) -> tuple[bytes, Leg | None]:
    """Run the PD protocol's prefill side; return the decode leg's body (adapter-defined wire format) and,
    for the parallel protocol, the prefill leg still running (judged beside the decode: ``pd_legs``).
    Each leg is pinned to its own backend's rank: the prefill's never carries the decode's, and a parallel
    leg's bootstrap room leads the prefill engine to the rank it is pinned to.

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
            status, data = await post(state, prefill.url + path, json.dumps(leg).encode(), headers)
        except UpstreamFailed as exc:
            exc.backend = prefill_id  # blame the prefill leg, not the decode backend
            raise
        finally:
            pool.finish_prefill_leg(prefill_id, prompt_tokens)
        answer = prefill_answer(prefill_id, status, data)
        decode_leg = decode_body_or_blame(prefill_id, lambda: adapter.decode_body(body, answer, endpoint))
        pool.record_success(prefill_id)  # ends its failure streak, as a served request does on decode
        return json.dumps({**decode_leg, **decode_pin.body}).encode(), None
    # The room decides which rank a parallel-style prefill engine serves on, and where its decode looks for
    # the KV: a room for another rank than the pin's fails the transfer (new_bootstrap_room: whose and why).
    # A completion batch: a room per prompt, each for the pinned rank (sglang_pd.prefill_body: why).
    rooms = [new_bootstrap_room(rank=prefill.dp_rank, ranks=prefill.dp_size) for _ in range(batch_size(body))]
    room: int | list[int] = rooms[0] if len(rooms) == 1 else rooms
    if prefill.dp_rank is not None and prefill.dp_size is None:
        state.metrics.room_without_dp_size(prefill_id, len(rooms))
    leg = {**adapter.prefill_body(body, endpoint, room), **pin.body}
    payload = json.dumps({**adapter.decode_body(body, None, endpoint, room), **decode_pin.body}).encode()
    pool.start_prefill_leg(prefill_id, prompt_tokens)
    task = asyncio.create_task(post(state, prefill.url + path, json.dumps(leg).encode(), headers))

    def ended(leg: asyncio.Task[tuple[int, bytes]]) -> None:
        # Released when the leg ends: answered, failed, or cancelled with its decode leg (``pd_legs.beside``).
        pool.finish_prefill_leg(prefill_id, prompt_tokens)
        if not leg.cancelled() and leg.exception() is None and leg.result()[0] < 400:
            pool.record_success(prefill_id)  # ends its failure streak (failures are judged in pd_legs)

    task.add_done_callback(ended)
    return payload, task


def batch_size(body: Mapping[str, Any]) -> int:
    """How many prompts a request carries: a completion's batch (``requests.prompts``), else one."""
    return 1 if "messages" in body else len(prompts(body.get("prompt")))


async def post(state: RouterState, url: str, body: bytes, headers: Mapping[str, str]) -> tuple[int, bytes]:
    """A non-streamed POST (PD prefill leg, mirrored copy) on the lean client when it can take it."""
    if state.http1 is not None and url.startswith("http://"):
        return await post_whole(state.http1, url, body, headers)
    return await post_json(state.session, url, body, headers)
