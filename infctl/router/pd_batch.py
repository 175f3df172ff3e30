"""A batch of completion prompts over sequential-style PD (vLLM's NIXL): one PD request per prompt, and their
answers merged into the one answer vLLM gives for the batch.

Why split: vLLM serves each prompt of a batch as its own engine request, and a prefill leg's prompts each
keep their KV for a remote decode, but the answer carries one ``kv_transfer_params``, the first prompt's
(vLLM 0.32 ``entrypoints/openai/completion/serving.py``, ``request_output_to_completion_response``:
``final_res_batch[0].kv_transfer_params``). Sent on with the whole batch, it would point every prompt's decode
at the first prompt's blocks and leave the other prompts' blocks held on the prefill engine until its abort
timeout (vLLM's own proxy, ``tests/v1/kv_connector/nixl_integration/toy_proxy_server.py``, does just that).

How vLLM answers a batch (same file, 0.32), which the merge reproduces from the per-prompt answers: prompt p's
sample k is choice ``p * n + k``; usage sums every prompt's tokens and every generated token; a whole answer's
``prompt_tokens_details`` is the last prompt's (``last_final_res.num_cached_tokens``), a stream's the first
output's; per-request ``metrics`` are left out for several prompts. A stream interleaves the prompts'
chunks as they come and ends with one usage chunk for them all (``stream_options.include_usage``).

SGLang's parallel style needs none of this: its engines take a list of rooms, one per prompt
(``sglang_pd``). Chat requests are never batches here.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from infctl.engines import RankPin, get_adapter
from infctl.router.legs import pd_payload
from infctl.router.requests import BadRequest, prompts

if TYPE_CHECKING:
    from infctl.router.state import RouterState

T = TypeVar("T")


def split_batch(state: RouterState, prefill_id: str, body: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The per-prompt bodies of a completion batch whose prefill engine speaks the sequential protocol; None
    for anything else (one prompt, a chat, a parallel-style engine), which goes as it is."""
    if "messages" in body:
        return None
    try:
        batch = prompts(body.get("prompt"))
    except BadRequest:
        return None
    if len(batch) < 2:
        return None
    backend = state.pool.backend(prefill_id)
    if get_adapter(backend.engine or state.cfg.engine).pd_style != "sequential":
        return None
    return [{**body, "prompt": p} for p in batch]


def shares(total: int, parts: Sequence[Mapping[str, Any]]) -> list[int]:
    """``total`` prompt tokens apportioned to ``parts`` by the length of each one's prompt (characters or
    ids), summing to ``total``: each prefill leg's share of the load the router counts."""
    sizes = [max(1, len(p["prompt"])) for p in parts]
    whole = sum(sizes)
    out = [total * s // whole for s in sizes]
    for i in range(total - sum(out)):
        out[i % len(out)] += 1
    return out


async def prefill_each(
    state: RouterState,
    parts: Sequence[dict[str, Any]],
    headers: Mapping[str, str],
    prefill_id: str,
    decode_pin: RankPin,
    prompt_tokens: int,
) -> list[bytes]:
    """Every prompt's prefill leg, at once; their decode legs' bodies in prompt order. The first failure
    (``UpstreamFailed`` blaming the prefill, ``PrefillRejected``) ends the others: the request is retried
    whole or answered with that 4xx."""
    legs = [
        asyncio.ensure_future(pd_payload(state, part, headers, prefill_id, decode_pin, tokens))
        for part, tokens in zip(parts, shares(prompt_tokens, parts), strict=True)
    ]
    return [payload for payload, _ in await every(legs)]


async def every(legs: Sequence[asyncio.Future[T]]) -> list[T]:
    """The results of ``legs`` (one per prompt), in order. The first failure, or the caller's cancellation,
    cancels the legs still running: an engine works on a request until its connection closes, and a batch
    that failed is retried whole or refused (``asyncio.gather`` alone leaves them running, unread)."""
    try:
        return list(await asyncio.gather(*legs))
    finally:
        for leg in legs:
            if not leg.done():
                leg.cancel()
            leg.add_done_callback(_read)


def _read(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


def renumber(chunk: Mapping[str, Any], prompt: int, n: int) -> dict[str, Any]:
    """A choice-carrying object (an answer or a stream chunk) of prompt ``prompt`` with its choices numbered
    as in the batch's answer."""
    choices = [{**c, "index": prompt * n + int(c.get("index", 0))} for c in chunk.get("choices") or ()]
    return {**chunk, "choices": choices}


def summed_usage(usages: Sequence[Mapping[str, Any]], details: Mapping[str, Any] | None) -> dict[str, Any]:
    """One usage for the batch: the prompts' and the generated tokens added up, ``details`` as the
    ``prompt_tokens_details`` (None: left out)."""
    prompt = sum(int(u.get("prompt_tokens") or 0) for u in usages)
    completion = sum(int(u.get("completion_tokens") or 0) for u in usages)
    out: dict[str, Any] = {"prompt_tokens": prompt, "total_tokens": prompt + completion}
    out["completion_tokens"] = completion
    if details is not None:
        out["prompt_tokens_details"] = details
    return out


def merge_answers(answers: Sequence[Mapping[str, Any]], n: int) -> bytes:
    """The batch's whole answer from its prompts' answers, in prompt order (see the module docstring)."""
    first, last = answers[0], answers[-1]
    merged: dict[str, Any] = {k: v for k, v in first.items() if k != "metrics"}
    merged["choices"] = [c for p, a in enumerate(answers) for c in renumber(a, p, n)["choices"]]
    usages = [a["usage"] for a in answers if isinstance(a.get("usage"), dict)]
    if usages:
        last_usage = last.get("usage")
        details = last_usage.get("prompt_tokens_details") if isinstance(last_usage, dict) else None
        merged["usage"] = summed_usage(usages, details)
    return json.dumps(merged).encode()


def sample_count(body: Mapping[str, Any]) -> int:
    """Choices per prompt (``n``), as vLLM reads it (absent or null: 1)."""
    n = body.get("n")
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else 1
