"""``/v1/completions`` and ``/v1/chat/completions``: OpenAI-compatible, streamed exactly like vLLM.

Streaming sends ``data: {json}\\n\\n`` events: for chat a first chunk with ``role`` and empty content, then
content chunks (``--stream-interval`` tokens each; the last carries ``finish_reason``), a usage chunk with
empty ``choices`` when ``stream_options.include_usage`` is set, and ``data: [DONE]``.
A client that disconnects aborts its request in the engine core.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiohttp import web

from infctl import tokens
from infctl.sim import prompt_tokens, samples
from infctl.sim.driver import Delta, RequestTrack
from infctl.sim.personality.http_json import SimHTTPError, compact_json, int_field, json_response
from infctl.sim.personality.pd import PDPlan
from infctl.sim.types import SimRequest

if TYPE_CHECKING:
    from infctl.sim.app import SimInstance


@dataclass(slots=True)
class Generation:
    """A validated generation request."""

    chat: bool
    request_id: str
    response_id: str
    created: int
    model: str
    prompt_ids: list[int]
    max_tokens: int
    stream: bool
    include_usage: bool
    seed: int

    def text(self, start: int, n: int) -> str:
        return "".join(" " + tokens.output_word(self.seed, i) for i in range(start, start + n))


async def completions(inst: SimInstance, request: web.Request) -> web.StreamResponse:
    return await _generate(inst, request, chat=False)


async def chat_completions(inst: SimInstance, request: web.Request) -> web.StreamResponse:
    return await _generate(inst, request, chat=True)


async def prompt_batch(inst: SimInstance, body: Mapping[str, Any], chat: bool) -> list[list[int]]:
    """The request's prompts as token ids, from the engine's tokenizer (``infctl.sim.prompt_tokens``):
    one for a chat or a completion's string or id list, one per item of a batch (strings or id lists)."""
    tok = inst.tokenizer
    if chat:
        return [
            await prompt_tokens.tokenized(
                tok,
                prompt_tokens.chat_chars(body),
                prompt_tokens.chat_ids,
                body,
                inst.personality.request_chat_template,
                inst.personality.reasoning_effort_template,
            )
        ]
    prompt = body.get("prompt")
    batch = prompt if isinstance(prompt, list) and prompt and isinstance(prompt[0], str | list) else [prompt]
    out = []
    for item in batch:
        if isinstance(item, str):
            ids = await prompt_tokens.tokenized(tok, len(item), prompt_tokens.text_ids, item, body)
        elif isinstance(item, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in item):
            ids = list(item)
        else:
            raise SimHTTPError(
                400, "Field required: prompt must be a string or a list of token ids", param="prompt"
            )
        if not ids:
            if item == []:
                raise SimHTTPError(400, "You must pass at least one prompt")
            raise SimHTTPError(400, "The prompt cannot be empty.", param="prompt")
        out.append(ids)
    return out


def parse_generation(
    inst: SimInstance, body: Mapping[str, Any], ids: list[int], *, chat: bool, request_id: str
) -> Generation:
    """The request's generation settings, given its prompt's token ids (``prompt_ids``)."""
    model = body.get("model")
    max_tokens = inst.personality.max_tokens(body, len(ids), chat=chat)
    options = body.get("stream_options")
    seed = int_field(body, "seed", -(2**63))
    prefix = "chatcmpl" if chat else "cmpl"
    return Generation(
        chat=chat, request_id=request_id, response_id=f"{prefix}-{request_id}", created=int(time.time()),
        model=str(model) if model else inst.model, prompt_ids=ids, max_tokens=max_tokens,
        stream=bool(body.get("stream", False)),
        include_usage=isinstance(options, dict) and bool(options.get("include_usage")),
        seed=seed if seed is not None else zlib.crc32(request_id.encode()),
    )  # fmt: skip


async def _generate(inst: SimInstance, request: web.Request, *, chat: bool) -> web.StreamResponse:
    persona = inst.personality
    body = await persona.read_generation(request, chat=chat)
    rid = request.headers.get("x-request-id") or uuid.uuid4().hex
    model = body.get("model")
    if not persona.accepts_model(model):
        raise persona.unknown_model(model)
    persona.check_generation(body, chat=chat)
    prompts = await prompt_batch(inst, body, chat)
    n = int_field(body, "n", 1) or 1
    if len(prompts) * n > 1 and not persona.parallel_sampling:
        raise SimHTTPError(400, "Only n=1 is supported by the simulated engine.", param="n")
    gens = [parse_generation(inst, body, ids, chat=chat, request_id=rid) for ids in prompts]
    refusal = persona.prompt_ids_refusal(prompts)
    if refusal is not None:
        return await _refuse(inst, request, gens[0], refusal)
    gen = gens[0]
    plan = inst.personality.pd_plan(body, len(gen.prompt_ids), rid)
    if plan.refusal is not None:
        return await _refuse(inst, request, gen, plan.refusal)
    if len(prompts) * n > 1:
        return await samples.generate(inst, request, gens, n, plan)
    if plan.max_tokens is not None:
        gen.max_tokens = plan.max_tokens
    ok = False
    inst.server_load += 1
    try:
        raise_injected_fault(inst)
        if plan.wait_local and plan.room is not None and plan.bootstrap_port is not None:
            await _wait_for_prefill(inst, plan.bootstrap_port, plan.room)
        req = SimRequest(
            request_id=inst.next_request_id(rid), prompt_ids=gen.prompt_ids, max_tokens=gen.max_tokens,
            arrival=inst.now(), remote_prefill=plan.remote_prefill, seed=gen.seed,
        )  # fmt: skip
        track = inst.driver.submit(req, interval=inst.settings.stream_interval)
        try:
            resp = await (
                _stream(inst, request, gen, track)
                if gen.stream
                else _respond(inst, request, gen, track, plan)
            )
            ok = track.first_token_at is not None
            return resp
        finally:
            if not track.done:
                inst.driver.abort(req.request_id)
    finally:
        inst.server_load -= 1
        inst.personality.pd_finished(plan, ok)


async def _refuse(
    inst: SimInstance, request: web.Request, gen: Generation, err: SimHTTPError
) -> web.StreamResponse:
    """A request the engine aborts before its first token: the error itself, or for a stream a 200 whose
    only event is the error (the engine answered 200 before its scheduler saw the request). A failed
    generation's chat stream has had its role chunk first: vLLM 0.32 yields it in the first iteration of
    the results, before ``_raise_if_error`` (chat_completion/serving.py chat_completion_stream_generator)."""
    if not gen.stream:
        raise err
    resp = sse_response(echoed_id(inst, gen))
    await resp.prepare(request)
    if gen.chat and err.generation:
        await resp.write(ChunkEncoder(gen).role())
    await resp.write(error_event(inst, err))
    await resp.write(b"data: [DONE]\n\n")
    await resp.write_eof()
    return resp


def raise_injected_fault(inst: SimInstance) -> None:
    """The error the fault plan injects into this request, if any."""
    status = inst.faults.injected_error()
    if status is not None:
        raise SimHTTPError(status, f"Injected fault: this request failed with status {status}.")


def error_event(inst: SimInstance, err: SimHTTPError) -> bytes:
    """``err`` as the engine's in-band stream error event, in ``json.dumps``'s default spacing, unlike their
    chunks: both engines write it so (create_streaming_error_response in vLLM 0.32 generate/base/serving.py
    and SGLang's serving_base.py)."""
    return f"data: {json.dumps(inst.personality.stream_error_body(err))}\n\n".encode()


def echoed_id(inst: SimInstance, gen: Generation) -> str | None:
    """The ``x-request-id`` a stream's head carries, if the engine echoes it (``app.engine_middleware`` adds
    it to every other answer; a stream's head is sent before the middleware sees it)."""
    return gen.request_id if inst.personality.echoes_request_id() else None


def sse_response(request_id: str | None) -> web.StreamResponse:
    """The (unprepared) response an event stream is written to, with ``x-request-id`` unless None."""
    headers = {"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache"}
    if request_id is not None:
        headers["x-request-id"] = request_id
    return web.StreamResponse(headers=headers)


async def _wait_for_prefill(inst: SimInstance, port: int, room: int) -> None:
    inst.pd_waiting += 1
    try:
        ok = await inst.registry.wait(port, room, inst.settings.pd_wait_timeout)
    finally:
        inst.pd_waiting -= 1
    if not ok:
        where = f"bootstrap_room {room} at bootstrap port {port}"
        raise SimHTTPError(500, f"KV transfer failed: no prefill completed for {where}.")


def _cut(request: web.Request) -> None:
    """The disconnect-after fault: reset the connection mid-response."""
    if request.transport is not None:
        request.transport.abort()
    raise asyncio.CancelledError


def _usage(gen: Generation, track: RequestTrack, produced: int) -> dict[str, Any]:
    return usage(len(gen.prompt_ids), produced, track.cached_tokens)


def usage(prompt: int, produced: int, cached: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt, "total_tokens": prompt + produced, "completion_tokens": produced,
        "prompt_tokens_details": {"cached_tokens": cached},
    }  # fmt: skip


def capacity_error() -> SimHTTPError:
    return SimHTTPError(
        400, "The request cannot be scheduled: its prompt needs more KV cache than the engine has."
    )


async def _respond(
    inst: SimInstance, request: web.Request, gen: Generation, track: RequestTrack, plan: PDPlan
) -> web.Response:
    limit = inst.faults.plan.disconnect_after
    produced = 0
    while True:
        delta: Delta = await track.queue.get()
        produced += delta.tokens
        if limit is not None and produced >= limit:
            _cut(request)
        if delta.finished:
            break
    reason = track.finish_reason or "length"
    if reason == "error":
        raise capacity_error()
    body: dict[str, Any] = {
        **answer_head(gen), "choices": [choice(gen, 0, produced, reason)],
        "usage": _usage(gen, track, produced),
        **inst.personality.response_extras(plan, len(gen.prompt_ids)),
    }  # fmt: skip
    return json_response(body)


def answer_head(gen: Generation) -> dict[str, Any]:
    """The fields a non-streamed answer starts with."""
    kind = "chat.completion" if gen.chat else "text_completion"
    return {"id": gen.response_id, "object": kind, "created": gen.created, "model": gen.model}


def choice(gen: Generation, index: int, produced: int, reason: str) -> dict[str, Any]:
    """Choice ``index`` of a non-streamed answer: ``produced`` tokens of ``gen``'s text."""
    text = gen.text(0, produced)
    if gen.chat:
        return {
            "index": index, "message": {"role": "assistant", "content": text},
            "logprobs": None, "finish_reason": reason, "stop_reason": None,
        }  # fmt: skip
    return {"index": index, "text": text, "logprobs": None, "finish_reason": reason, "stop_reason": None}


class ChunkEncoder:
    """SSE events of choice ``index`` from templates: the hot path only JSON-encodes the new text."""

    def __init__(self, gen: Generation, index: int = 0) -> None:
        self.gen = gen
        obj = "chat.completion.chunk" if gen.chat else "text_completion"
        head = compact_json(
            {"id": gen.response_id, "object": obj, "created": gen.created, "model": gen.model}
        )
        self._head = head[:-1]
        key = '"delta":{"content":' if gen.chat else '"text":'
        self._open = f'data: {self._head},"choices":[{{"index":{index},{key}'
        self._close = "}" if gen.chat else ""
        self._index = index

    def role(self) -> bytes:
        return (
            f'data: {self._head},"choices":[{{"index":{self._index},'
            '"delta":{"role":"assistant","content":""},'
            '"logprobs":null,"finish_reason":null}]}\n\n'
        ).encode()

    def content(self, text: str, finish_reason: str | None) -> bytes:
        reason = "null" if finish_reason is None else json.dumps(finish_reason)
        stop = "" if self.gen.chat else ',"stop_reason":null'
        return (
            f'{self._open}{compact_json(text)}{self._close},"logprobs":null,"finish_reason":{reason}{stop}}}]}}\n\n'
        ).encode()

    def usage(self, usage: dict[str, Any]) -> bytes:
        return f'data: {self._head},"choices":[],"usage":{compact_json(usage)}}}\n\n'.encode()


async def _stream(
    inst: SimInstance, request: web.Request, gen: Generation, track: RequestTrack
) -> web.StreamResponse:
    resp = sse_response(echoed_id(inst, gen))
    try:
        await resp.prepare(request)
        await _write_events(inst, request, resp, gen, track)
        await resp.write_eof()
    except ConnectionResetError:
        # The client left between two writes: end quietly, as aiohttp does when it notices first.
        raise asyncio.CancelledError from None
    return resp


async def _write_events(
    inst: SimInstance, request: web.Request, resp: web.StreamResponse, gen: Generation, track: RequestTrack
) -> None:
    enc = ChunkEncoder(gen)
    if gen.chat:
        await resp.write(enc.role())
    limit = inst.faults.plan.disconnect_after
    produced = 0
    while True:
        delta: Delta = await track.queue.get()
        reason = delta.finish_reason if delta.finished else None
        if reason == "error":
            await resp.write(error_event(inst, capacity_error()))
            break
        if delta.tokens or delta.finished:
            await resp.write(enc.content(gen.text(produced, delta.tokens), reason))
            produced += delta.tokens
        if limit is not None and produced >= limit:
            _cut(request)
        if delta.finished:
            break
    if gen.include_usage:
        await resp.write(enc.usage(_usage(gen, track, produced)))
    await resp.write(b"data: [DONE]\n\n")
