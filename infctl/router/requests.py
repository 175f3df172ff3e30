"""Reading an OpenAI request body into what the router needs, with errors shaped like the engines'."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from infctl.router.relay import ClientRequest
from infctl.router.snapshot import RequestInfo
from infctl.tokens import chat_prompt_text, count_tokens, token_ids


def error_response(status: int, message: str, *, kind: str = "BadRequestError") -> web.Response:
    """An error in the OpenAI shape vLLM uses, so clients handle router and engine errors alike."""
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


def prompt_text(body: Mapping[str, Any], *, chat: bool) -> str:
    """The prompt under the token convention of ``infctl.tokens`` (an estimate for real tokenizers)."""
    if chat:
        messages = body.get("messages")
        if not isinstance(messages, list):
            raise BadRequest("'messages' must be a list of messages")
        return chat_prompt_text(m for m in messages if isinstance(m, dict))
    prompt = body.get("prompt")
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list) and all(isinstance(p, str) for p in prompt):
        return " ".join(prompt)
    raise BadRequest("'prompt' must be a string (or a list of strings)")


def request_info(
    body: Mapping[str, Any],
    *,
    chat: bool,
    request_id: str,
    headers: Mapping[str, str],
    block_size: int,
    session_header: str,
    hashes: bool = True,
    max_prompt_chars: int | None = None,
) -> RequestInfo:
    """What the policies read from one request. ``hashes=False`` (a policy that uses no prefix index) only
    counts the prompt's tokens: no token ids, no block hashes, a fraction of the cost on long prompts.

    ``max_prompt_chars`` bounds the prompt text's characters (a pre-tokenised prompt's ids) before any
    tokenising or hashing, whose cost grows with the prompt and blocks the event loop: above it, a
    BadRequest with status 413. None: no bound."""
    prompt = body.get("prompt")
    ids: list[int] | None = None
    if not chat and isinstance(prompt, list) and prompt:
        _check_length(len(prompt), max_prompt_chars, "token ids")
        if all(isinstance(t, int) for t in prompt):
            ids = [int(t) for t in prompt]
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    model = body.get("model")
    common: dict[str, Any] = {
        "model": model if isinstance(model, str) else "",
        "block_size": block_size,
        "session_key": headers.get(session_header),
        "is_stream": bool(body.get("stream")),
        "max_tokens": max_tokens if isinstance(max_tokens, int) else None,
    }
    if ids is None:
        text = prompt_text(body, chat=chat)
        _check_length(len(text), max_prompt_chars, "characters")
        if not hashes:
            return RequestInfo(request_id, prompt_tokens=count_tokens(text), **common)
        ids = token_ids(text)
    elif not hashes:
        return RequestInfo(request_id, prompt_tokens=len(ids), **common)
    return RequestInfo.from_ids(request_id, ids, **common)


def _check_length(n: int, limit: int | None, unit: str) -> None:
    if limit is not None and n > limit:
        raise BadRequest(
            f"the prompt is {n} {unit} long; this router accepts at most {limit} (max_prompt_chars)", 413
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
