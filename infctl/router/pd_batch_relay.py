"""The I/O of a split batch (``pd_batch`` has the rules): its prompts' decode legs sent at once, their answers
merged into the client's one response, whole or streamed.

``BatchRelay.relay`` has ``attempt.relay_answer``'s signature, so ``attempt.try_once`` runs the legs as any
try (pool accounting, metrics, retries). The contract is the relay's: ``UpstreamFailed`` while the client has
nothing (a leg's 5xx, a leg broken before the first event, a leg's stream opening with an engine's 5xx
error event, as a decode that cannot load its KV answers: ``opening``), so the batch is retried whole; a
leg's 4xx is the client's answer; a leg that breaks (or sends an error event) after the client had events
leaves the stream open for the caller, which ends it with an error event (a batch is never continued:
``resume.uncontinuable``).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import aiohttp
from aiohttp import web

from infctl.router.client import ClientRequest
from infctl.router.legs import post
from infctl.router.opening import ErrorEvent, judge_opening
from infctl.router.pd_batch import every, merge_answers, renumber, summed_usage
from infctl.router.pd_legs import openai_error
from infctl.router.relay import RelayedResponse
from infctl.router.resume_relay import ClientStream
from infctl.router.upstream import RelayResult, UpstreamFailed, read_events, send

if TYPE_CHECKING:
    from infctl.router.state import RouterState

_EVENT_END = re.compile(rb"\r?\n\r?\n")
_DONE = b"[DONE]"


class BatchRelay:
    """Relays the decode legs ``payloads`` (one per prompt, in prompt order) as one answer with ``n``
    choices per prompt."""

    def __init__(self, payloads: Sequence[bytes], n: int, *, stream: bool) -> None:
        self.payloads, self.n, self.stream = payloads, n, stream

    async def relay(
        self,
        state: RouterState,
        request: ClientRequest,
        url: str,
        payload: bytes,
        headers: Mapping[str, str],
        rid: str,
        on_first: Callable[[], None],
        keep: list[bytes] | None = None,
    ) -> tuple[web.StreamResponse, RelayResult]:
        """``payload`` and ``keep`` are unused: the legs' bodies came with the relay, and a batch's stream
        is never continued, so nothing is kept for it."""
        loop = asyncio.get_running_loop()
        sent_at = loop.time()
        if not self.stream:
            answers = await every(
                [asyncio.ensure_future(post(state, url, p, headers)) for p in self.payloads]
            )
            refused = next(((s, b) for s, b in answers if s >= 400), None)
            if refused is not None:
                return _refusal(*refused, rid), RelayResult(refused[0], None, 0, completed=True)
            try:
                merged = merge_answers([json.loads(b) for _, b in answers], self.n)
            except (ValueError, KeyError, TypeError) as exc:
                raise UpstreamFailed(f"a decode leg's answer is not a completion: {exc}") from exc
            on_first()
            out = web.Response(body=merged, content_type="application/json", headers={"x-request-id": rid})
            return out, RelayResult(200, loop.time() - sent_at, len(merged), completed=True)
        return await _Merge(self.n, on_first, sent_at).run(state, request, url, self.payloads, headers, rid)


def _refusal(status: int, body: bytes, rid: str) -> web.Response:
    """A decode leg's 4xx, the batch's answer (it would have been the whole batch's on one engine)."""
    return web.json_response(openai_error(status, body), status=status, headers={"x-request-id": rid})


class _Merge:
    """One streamed batch: its legs' events, renumbered, into the client's one stream."""

    def __init__(self, n: int, on_first: Callable[[], None], sent_at: float) -> None:
        self.n, self.on_first, self.sent_at = n, on_first, sent_at
        self.usages: dict[int, dict[str, Any]] = {}
        self.usage_chunk: dict[str, Any] | None = None
        self.details: Any = None
        """The first output's ``prompt_tokens_details``: vLLM's stream reports its ``num_cached_tokens``."""
        self.first_prompt: int | None = None
        self.client: ClientStream | None = None
        """The client's stream, once open."""
        self.first: float | None = None
        """Seconds from the legs' sending to the client's first event."""

    async def run(
        self,
        state: RouterState,
        request: ClientRequest,
        url: str,
        payloads: Sequence[bytes],
        headers: Mapping[str, str],
        rid: str,
    ) -> tuple[web.StreamResponse, RelayResult]:
        opened = [asyncio.ensure_future(send(state.session, url, p, headers)) for p in payloads]
        pumps: list[asyncio.Task[None]] = []
        try:
            resps = await every(opened)
            for resp in resps:
                if resp.status >= 500:
                    raise UpstreamFailed(f"HTTP {resp.status}", status=resp.status)
            refused = next((r for r in resps if r.status >= 400), None)
            if refused is not None:
                status, body = refused.status, await refused.read()
                return _refusal(status, body, rid), RelayResult(status, None, 0, completed=True)
            queue: asyncio.Queue[tuple[int, bytes | BaseException | None]] = asyncio.Queue()
            pumps = [asyncio.create_task(_pump(p, r, queue)) for p, r in enumerate(resps)]
            wrote, left, failed = 0, len(resps), False
            while left:
                prompt, item = await queue.get()
                if item is None:
                    left -= 1
                    continue
                if isinstance(item, BaseException):
                    if self.client is None:
                        raise UpstreamFailed(f"a decode leg broke before its first event: {item}")
                    return self.client.out, RelayResult(
                        200, self.first, wrote, completed=False, appendable=True
                    )
                if self.client is None:
                    # Judged while the client has nothing (no role chunks to hold: completions only).
                    verdict = judge_opening(item, chunked=False)
                    if isinstance(verdict, ErrorEvent):
                        raise UpstreamFailed(f"a decode leg's {verdict.reason}", status=verdict.status)
                data, failed = self.events(prompt, item)
                if not data:
                    continue
                try:
                    await self.write(request, rid, data)
                except ConnectionResetError:
                    return self.gone(wrote)
                wrote += len(data)
                if failed:
                    break
            closing = b"data: [DONE]\n\n" if failed else self.closing()
            try:
                await self.write(request, rid, closing)
            except ConnectionResetError:
                return self.gone(wrote)
            assert self.client is not None
            return await self.client.end(), RelayResult(200, self.first, wrote + len(closing), completed=True)
        finally:
            for task in pumps:
                task.cancel()
            for leg in opened:
                # Every leg that opened, closed: also those opened when another failed to (``every``).
                if leg.done() and not leg.cancelled() and leg.exception() is None:
                    leg.result().close()

    async def write(self, request: ClientRequest, rid: str, data: bytes) -> None:
        """``data`` to the client, whose stream opens with the first write (the batch's first token)."""
        if self.client is None:
            self.client = await _open(request, rid)
            self.first = asyncio.get_running_loop().time() - self.sent_at
            self.on_first()
        await self.client.write(data)

    def gone(self, wrote: int) -> tuple[web.StreamResponse, RelayResult]:
        """The answer when the client went away after ``wrote`` bytes."""
        out = self.client.out if self.client is not None else RelayedResponse(200, keep_alive=False)
        return out, RelayResult(200, self.first, wrote, completed=False, client_gone=True)

    def events(self, prompt: int, raw: bytes) -> tuple[bytes, bool]:
        """Prompt ``prompt``'s whole events rewritten for the batch's stream, and whether one was an
        error (the stream ends there, as vLLM's ends at a generation error)."""
        out: list[bytes] = []
        for event in _EVENT_END.split(raw):
            data = event.strip()
            if not data.startswith(b"data:"):
                continue
            payload = data[5:].strip()
            if payload == _DONE:
                continue
            try:
                chunk = json.loads(payload)
            except ValueError:
                out.append(data + b"\n\n")
                continue
            if not isinstance(chunk, dict) or "error" in chunk:
                out.append(data + b"\n\n")
                return b"".join(out), True
            usage = chunk.get("usage")
            if not chunk.get("choices") and isinstance(usage, dict):
                self.usages[prompt] = usage
                self.usage_chunk = self.usage_chunk or chunk
                continue
            if self.first_prompt is None:
                self.first_prompt = prompt
            out.append(b"data: " + json.dumps(renumber(chunk, prompt, self.n)).encode() + b"\n\n")
        return b"".join(out), False

    def closing(self) -> bytes:
        """The batch's usage chunk (when the legs sent theirs) and the stream's end."""
        if self.usage_chunk is None:
            return b"data: [DONE]\n\n"
        usages = [self.usages[p] for p in sorted(self.usages)]
        first = self.usages.get(self.first_prompt if self.first_prompt is not None else min(self.usages))
        chunk = {k: v for k, v in self.usage_chunk.items() if k != "metrics"}
        chunk["usage"] = summed_usage(usages, (first or {}).get("prompt_tokens_details"))
        return b"data: " + json.dumps(chunk).encode() + b"\n\ndata: [DONE]\n\n"


async def _pump(
    prompt: int, resp: aiohttp.ClientResponse, queue: asyncio.Queue[tuple[int, bytes | BaseException | None]]
) -> None:
    """Leg ``prompt``'s whole events onto ``queue``, then None; an exception when it broke (or ended
    without ``[DONE]``, which a finished vLLM stream always sends)."""
    held, done = b"", False
    try:
        while True:
            chunk, held = await read_events(resp.content, held)
            if not chunk:
                break
            done = done or _DONE in chunk
            queue.put_nowait((prompt, chunk))
    except (TimeoutError, aiohttp.ClientError, ConnectionResetError) as exc:
        queue.put_nowait((prompt, exc))
        return
    queue.put_nowait((prompt, None if done else ConnectionResetError("the stream ended without [DONE]")))


async def _open(request: ClientRequest, rid: str) -> ClientStream:
    """The client's event stream, opened: aiohttp's prepared response, or on the lean front a chunked head
    written to the socket (``ClientStream`` then frames each write as a chunk)."""
    kind = "text/event-stream; charset=utf-8"
    if isinstance(request, web.BaseRequest):
        out = web.StreamResponse(headers={"content-type": kind, "x-request-id": rid})
        await out.prepare(request)
        return ClientStream(request, out)
    tr = request.transport
    if tr is None or tr.is_closing():
        raise ConnectionResetError("the client went away")
    close = "" if request.keep_alive else "connection: close\r\n"
    head = f"HTTP/1.1 200 OK\r\ncontent-type: {kind}\r\nx-request-id: {rid}\r\ntransfer-encoding: chunked\r\n"
    tr.write(f"{head}{close}\r\n".encode("utf-8", "surrogateescape"))
    return ClientStream(request, RelayedResponse(200, keep_alive=request.keep_alive))
