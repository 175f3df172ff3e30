"""Reading an OpenAI request body into what the router needs, with errors shaped like the engines'.

Prompt tokens come from the router's tokenizer (``infctl.tokenization``): the model's own, an estimate, or
the simulator's words. A long prompt (the tokenizer's ``off_loop_chars``) is tokenized and hashed in a
worker thread (``tokenizers`` releases the GIL while it works), so one big request does not hold up the
others. With an ``EstimatePlan`` the model's tokenizer is skipped where the estimate decides alike
(``infctl.router.estimating``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from infctl.router.client import ClientRequest
from infctl.router.snapshot import RequestInfo
from infctl.tokenization import (
    EstimateTokenizer,
    Tokenizer,
    TokenizerError,
    chat_options,
    check_messages,
    message_text,
)
from infctl.tokenization.band import RatioBand

ESTIMATE = EstimateTokenizer()


def error_response(status: int, message: str, *, kind: str | None = None) -> web.Response:
    """An error in the OpenAI shape vLLM uses, so clients handle router and engine errors alike. ``kind``
    defaults by status: ``ServiceUnavailableError`` for 503, else ``BadRequestError``."""
    kind = kind or ("ServiceUnavailableError" if status == 503 else "BadRequestError")
    body = {"error": {"message": message, "type": kind, "param": None, "code": status}}
    return web.json_response(body, status=status)


class BadRequest(Exception):
    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def parse_body(raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadRequest(f"request body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object")
    return body


def prompt_chars(body: Mapping[str, Any], *, chat: bool) -> int:
    """Characters of prompt text (token ids of a pre-tokenised prompt), over every prompt of a batch: what
    the length bound and the choice to tokenize off the loop look at, known before any tokenizing.
    BadRequest for a body whose prompt or messages have the wrong shape."""
    if chat:
        try:
            messages = check_messages(body.get("messages"))
        except TokenizerError as exc:
            raise BadRequest(exc.message) from None
        return sum(len(message_text(m)) + len(m["role"]) for m in messages)
    return sum(map(len, prompts(body.get("prompt"))))


def prompts(prompt: object) -> list[str] | list[list[int]]:
    """A completion request's prompts, as vLLM's ``prompt_to_seq`` (``vllm/renderers/inputs/preprocess.py``,
    0.32) splits them: a string or a list of token ids is one prompt; a list of strings, or of token-id
    lists, is a batch, each served as its own sequence. BadRequest for any other shape."""
    if isinstance(prompt, str):
        return [prompt]
    if isinstance(prompt, list) and prompt:
        if all(isinstance(t, int) for t in prompt):
            return [prompt]
        if all(isinstance(p, str) for p in prompt):
            return prompt
        if all(isinstance(p, list) and all(isinstance(t, int) for t in p) for p in prompt):
            return prompt
    raise BadRequest(
        "'prompt' must be a string, a list of strings, a list of token ids or a list of token-id lists"
    )


def request_info(
    body: Mapping[str, Any],
    *,
    chat: bool,
    request_id: str,
    headers: Mapping[str, str],
    block_size: int,
    session_header: str,
    tokenizer: Tokenizer,
    hashes: bool = True,
    max_prompt_chars: int | None = None,
    chars: int | None = None,
    own_template: bool = False,
) -> RequestInfo:
    """What the policies read from one request. ``hashes=False`` (a policy that uses no prefix index) only
    counts the prompt's tokens: no block hashes. ``own_template``: a chat's own template is rendered
    (``trust_request_chat_template``); else the model's is.

    ``max_prompt_chars`` bounds the prompt's characters (a pre-tokenised prompt's ids) before any
    tokenizing or hashing: above it, a BadRequest with status 413. None: no bound. ``chars``: the
    prompt's ``prompt_chars`` when the caller has it already."""
    chars = prompt_chars(body, chat=chat) if chars is None else chars
    _check_length(chars, max_prompt_chars)
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    model = body.get("model")
    common: dict[str, Any] = {
        "model": model if isinstance(model, str) else "",
        "block_size": block_size,
        "session_key": headers.get(session_header),
        "is_stream": bool(body.get("stream")),
        "max_tokens": max_tokens
        if isinstance(max_tokens, int) and not isinstance(max_tokens, bool)
        else None,
        "prompt_chars": chars,
    }
    try:
        ids, count = _prompt_ids(body, chat, tokenizer, count_only=not hashes, own_template=own_template)
    except TokenizerError as exc:  # the prompt's fault (400), or no engine to count it (503)
        raise BadRequest(exc.message, getattr(exc, "status", 400)) from None
    if ids is None:
        return RequestInfo(request_id, prompt_tokens=count, **common)
    return RequestInfo.from_ids(request_id, ids, prompt_tokens=count, **common)


@dataclass(frozen=True, slots=True)
class EstimatePlan:
    """Route on the estimate unless it could decide differently from the model's tokenizer: when a
    threshold (``count <= t``) falls within ``band`` of the estimate."""

    band: RatioBand
    thresholds: tuple[int, ...]


async def read_request_info(
    body: Mapping[str, Any],
    *,
    chat: bool,
    loop: asyncio.AbstractEventLoop,
    estimate: EstimatePlan | None = None,
    **kwargs: Any,
) -> RequestInfo:
    """``request_info``, in a worker thread when the prompt is long for its tokenizer. With ``estimate`` (an
    exact tokenizer whose ids no index needs), the estimate's info (``estimated``) when it decides alike."""
    chars = prompt_chars(body, chat=chat)  # once: request_info takes it rather than count again
    if estimate is not None and not (chat and _templated_extras(body)):
        guess = await _info(body, chat, chars, loop, {**kwargs, "tokenizer": ESTIMATE})
        if estimate.band.decides(chars, guess.prompt_tokens, estimate.thresholds):
            return dataclasses.replace(guess, estimated=True)
    return await _info(body, chat, chars, loop, kwargs)


async def _info(
    body: Mapping[str, Any], chat: bool, chars: int, loop: asyncio.AbstractEventLoop, kwargs: dict[str, Any]
) -> RequestInfo:
    # A request's own chat template (rendered when trusted) is code of unknown cost: rendered in a worker
    # thread, whatever its messages' length, so a slow one holds a thread, not the event loop.
    own = chat and kwargs.get("own_template", False) and _brings_template(body)
    if chars <= kwargs["tokenizer"].off_loop_chars and not own:
        return request_info(body, chat=chat, chars=chars, **kwargs)
    call = functools.partial(request_info, body, chat=chat, chars=chars, **kwargs)
    return await loop.run_in_executor(None, call)


def _brings_template(body: Mapping[str, Any]) -> bool:
    kwargs = body.get("chat_template_kwargs")
    return bool(body.get("chat_template") or (isinstance(kwargs, dict) and kwargs.get("chat_template")))


def _templated_extras(body: Mapping[str, Any]) -> bool:
    # Tools, template switches and the request's own template add text only the real template writes (a
    # tool schema can be thousands of tokens): the estimate, which renders messages alone, cannot bound
    # them.
    return bool(body.get("tools") or body.get("chat_template_kwargs") or body.get("chat_template"))


def exact_count(
    body: Mapping[str, Any], *, chat: bool, tokenizer: Tokenizer, own_template: bool = False
) -> int:
    """The prompt's count by ``tokenizer`` (a body ``request_info`` already accepted)."""
    return _prompt_ids(body, chat, tokenizer, count_only=True, own_template=own_template)[1]


def _prompt_ids(
    body: Mapping[str, Any], chat: bool, tok: Tokenizer, *, count_only: bool, own_template: bool
) -> tuple[Sequence[int] | None, int]:
    """The ids whose blocks are hashed (None with ``count_only``) and the prompt tokens, as vLLM's
    ``usage.prompt_tokens`` counts them. The estimate's ids come as an array: hashed as they are, without a
    Python int per id.

    A batch of completion prompts is counted as vLLM's ``serving_completion`` counts it: each prompt
    encoded on its own (its special tokens each), the counts summed. It goes to one backend, which serves
    every prompt: its blocks hashed are the ones every prompt starts with (their common prefix), the only
    cached blocks that save prefill for the whole batch and that every prompt leaves behind. One prompt's
    own blocks would pull the batch to a backend helping that prompt alone."""
    if chat:
        if isinstance(tok, EstimateTokenizer) and not count_only:
            ids: Sequence[int] = tok.chat_array(body["messages"])
        else:
            # The request's own template only when the engines render it (trust_request_chat_template:
            # vLLM's --trust-request-chat-template); without that flag vLLM answers 400 before rendering
            # anything (OnlineRenderer.validate_chat_template, 0.32), so the count is moot and the model's
            # template, cheap and known, renders: no client has the router run a template of its own.
            ids = tok.chat_ids(body["messages"], **chat_options(body, own_template=own_template))
        return (None if count_only else ids), len(ids)
    batch = prompts(body["prompt"])
    special = body.get("add_special_tokens", True) is not False
    if count_only:
        return None, sum(len(p) if isinstance(p, list) else tok.count(p, special=special) for p in batch)
    each = [_completion_ids(p, tok, special) for p in batch]
    return _common_prefix(each), sum(map(len, each))


def _completion_ids(prompt: str | list[int], tok: Tokenizer, special: bool) -> Sequence[int]:
    if isinstance(prompt, list):
        return [int(t) for t in prompt]
    return tok.ids(prompt) if isinstance(tok, EstimateTokenizer) else tok.encode(prompt, special=special)


def _common_prefix(seqs: list[Sequence[int]]) -> Sequence[int]:
    if len(seqs) == 1:
        return seqs[0]
    # The lexicographically least and greatest share exactly the prefix all of them share.
    low, high = min(seqs), max(seqs)  # type: ignore[type-var]
    n = next((i for i, (a, b) in enumerate(zip(low, high, strict=False)) if a != b), len(low))
    return low[:n]


def _check_length(n: int, limit: int | None) -> None:
    if limit is not None and n > limit:
        raise BadRequest(
            f"the prompt is {n} characters long; this router accepts at most {limit} (max_prompt_chars)", 413
        )


async def read_body(request: ClientRequest, limit_s: float) -> bytes:
    """The whole body, within ``limit_s`` (TimeoutError) when it is still arriving: a client trickling a
    body would hold a connection and a task forever. The lean front enforces this itself (``front.py``);
    on aiohttp's, a body already whole (the common case: it came with the head) needs no timer."""
    content = getattr(request, "content", None)
    if content is None or content.is_eof():
        return await request.read()
    async with asyncio.timeout(limit_s):
        return await request.read()
