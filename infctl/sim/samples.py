"""Requests for several sequences at once, ``n`` > 1 or a batch of prompts, answered as vLLM answers them.

One core request per sequence, each with its own seed (its own text); choice ``prompt * n + sample`` (vLLM's
numbering); usage adds up the generated tokens and counts each prompt's tokens once (vLLM 0.32 answers
``n: 2`` on a 3-token prompt with ``prompt_tokens`` 3). A stream opens with a role chunk per choice (chat)
and interleaves the choices' chunks as their tokens come. The disconnect-after fault acts on
single-sequence requests only.

The engine counts every sequence, as vLLM's engine core does its child requests (checked on vLLM 0.32's CPU
build): ``vllm:prompt_tokens_total``, the prefix-cache queries, ``vllm:request_success_total`` and the
per-request histograms grow by ``n`` per prompt, and the later sequences hit the blocks the first one
caches in the same step (``infctl.sim.scheduler``). ``usage.prompt_tokens_details.cached_tokens`` is one
sequence's, the one vLLM's serving layer reads: the last to finish of the last prompt in an answer
(``final_res.num_cached_tokens``), the first sequence's in a stream (its first output's).

A PD leg's ``kv_transfer_params`` apply to every sequence, as vLLM passes the request's to each of its engine
requests (``CompletionRequest.to_sampling_params``: ``extra_args``): a prefill leg's each generate one token
and keep their KV; a decode leg's each take theirs as transferred. A prefill leg's answer carries one
``kv_transfer_params``, the first prompt's (vLLM 0.32 ``request_output_to_completion_response``:
``final_res_batch[0].kv_transfer_params``).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from aiohttp import web

from infctl.sim import routes
from infctl.sim.driver import Delta, RequestTrack, SampleGroup
from infctl.sim.personality.http_json import json_response
from infctl.sim.personality.pd import PDPlan
from infctl.sim.types import SimRequest

if TYPE_CHECKING:
    from infctl.sim.app import SimInstance
    from infctl.sim.routes import Generation


async def generate(
    inst: SimInstance, request: web.Request, prompts: Sequence[Generation], n: int, plan: PDPlan | None = None
) -> web.StreamResponse:
    """Serve ``n`` sequences of each of ``prompts`` (one ``Generation`` per prompt) as one answer; ``plan``:
    the request's PD part, the same for every sequence (see the module docstring)."""
    plan = plan or PDPlan()
    seqs = [
        dataclasses.replace(gen, seed=gen.seed + p * n + k, max_tokens=plan.max_tokens or gen.max_tokens)
        for p, gen in enumerate(prompts)
        for k in range(n)
    ]
    inst.server_load += 1
    try:
        routes.raise_injected_fault(inst)
        reqs = [
            SimRequest(
                request_id=inst.next_request_id(g.request_id),
                prompt_ids=g.prompt_ids,
                max_tokens=g.max_tokens,
                arrival=inst.now(),
                remote_prefill=plan.remote_prefill,
                seed=g.seed,
            )
            for g in seqs
        ]
        groups = [SampleGroup(n, n) for _ in prompts]
        tracks = [
            inst.driver.submit(r, interval=inst.settings.stream_interval, group=groups[i // n])
            for i, r in enumerate(reqs)
        ]
        try:
            if seqs[0].stream:
                return await _stream(inst, request, seqs, tracks, n)
            return await _respond(inst, seqs, tracks, n, plan)
        finally:
            for req, track in zip(reqs, tracks, strict=True):
                if not track.done:
                    inst.driver.abort(req.request_id)
    finally:
        inst.server_load -= 1


def _usage(seqs: Sequence[Generation], produced: int, n: int, cached: RequestTrack) -> dict[str, Any]:
    """Usage counting each prompt once and ``cached``'s prefix hit (see the module docstring)."""
    prompt = sum(len(seqs[i].prompt_ids) for i in range(0, len(seqs), n))
    return routes.usage(prompt, produced, cached.cached_tokens)


def _last_finished(tracks: Sequence[RequestTrack], n: int) -> RequestTrack:
    """The last prompt's sequence that finished last (in a step, the last scheduled: the highest index)."""
    order = range(len(tracks) - n, len(tracks))
    return tracks[max(order, key=lambda i: (tracks[i].last_token_at or 0.0, i))]


async def _drain(track: RequestTrack) -> int:
    produced = 0
    while True:
        delta: Delta = await track.queue.get()
        produced += delta.tokens
        if delta.finished:
            return produced


async def _respond(
    inst: SimInstance, seqs: Sequence[Generation], tracks: Sequence[RequestTrack], n: int, plan: PDPlan
) -> web.Response:
    counts = await asyncio.gather(*(_drain(t) for t in tracks))
    if any(t.finish_reason == "error" for t in tracks):
        raise routes.capacity_error()
    choices = [
        routes.choice(g, i, c, t.finish_reason or "length")
        for i, (g, t, c) in enumerate(zip(seqs, tracks, counts, strict=True))
    ]
    first = seqs[0]
    usage = _usage(seqs, sum(counts), n, _last_finished(tracks, n))
    body: dict[str, Any] = {
        **routes.answer_head(first), "choices": choices, "usage": usage,
        **inst.personality.response_extras(plan, len(first.prompt_ids)),
    }  # fmt: skip
    return json_response(body)


async def _stream(
    inst: SimInstance,
    request: web.Request,
    seqs: Sequence[Generation],
    tracks: Sequence[RequestTrack],
    n: int,
) -> web.StreamResponse:
    resp = routes.sse_response(routes.echoed_id(inst, seqs[0]))
    merged: asyncio.Queue[tuple[int, Delta]] = asyncio.Queue()

    async def pump(i: int, track: RequestTrack) -> None:
        while True:
            delta: Delta = await track.queue.get()
            merged.put_nowait((i, delta))
            if delta.finished:
                return

    pumps = [asyncio.create_task(pump(i, t)) for i, t in enumerate(tracks)]
    try:
        await resp.prepare(request)
        encoders = [routes.ChunkEncoder(g, i) for i, g in enumerate(seqs)]
        if seqs[0].chat:
            for enc in encoders:
                await resp.write(enc.role())
        produced = [0] * len(seqs)
        left = len(seqs)
        while left:
            i, delta = await merged.get()
            reason = delta.finish_reason if delta.finished else None
            if reason == "error":
                await resp.write(routes.error_event(inst, routes.capacity_error()))
                break
            if delta.tokens or delta.finished:
                await resp.write(encoders[i].content(seqs[i].text(produced[i], delta.tokens), reason))
                produced[i] += delta.tokens
            left -= delta.finished
        if seqs[0].include_usage:
            await resp.write(encoders[0].usage(_usage(seqs, sum(produced), n, tracks[0])))
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
    except ConnectionResetError:
        raise asyncio.CancelledError from None
    finally:
        for task in pumps:
            task.cancel()
    return resp
