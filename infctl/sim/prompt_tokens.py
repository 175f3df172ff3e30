"""A request's prompt token ids, as the engine computes them with the simulator's tokenizer.

Both engines tokenize a completion's ``prompt`` with the model's tokenizer (special tokens added unless the
request's ``add_special_tokens`` is false), and render a chat's ``messages`` with the model's chat template
before tokenizing them without special tokens (vLLM's defaults: ``add_generation_prompt`` true,
``add_special_tokens`` false). ``infctl.tokenization`` does both; here the request's fields are checked
and its errors become the engine's 400s. With the default ``words`` tokenizer this is the simulator's
convention (``infctl.tokens``), unchanged.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Mapping
from typing import Any

from infctl.sim.personality.base import SimHTTPError
from infctl.tokenization import Tokenizer, TokenizerError, chat_options, content_text


def messages_of(body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The body's ``messages``: a non-empty list of objects, or a 400."""
    messages = body.get("messages")
    if messages == []:
        # vLLM 0.32's words (its chat renderer), for /v1/chat/completions and /tokenize alike.
        raise SimHTTPError(
            400, "Cannot apply chat template to an empty conversation. Provide at least one message."
        )
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise SimHTTPError(
            400, "Field required: messages must be a non-empty list of objects", param="messages"
        )
    return messages


def chat_ids(tok: Tokenizer, body: Mapping[str, Any]) -> list[int]:
    """Token ids of a chat request's prompt (its ``messages`` and template options)."""
    messages = messages_of(body)
    try:
        return tok.chat_ids(messages, **chat_options(body))
    except TokenizerError as exc:
        raise SimHTTPError(400, exc.message, param="messages") from None


def text_ids(tok: Tokenizer, text: str, body: Mapping[str, Any]) -> list[int]:
    """Token ids of a completion prompt's text (special tokens unless ``add_special_tokens`` is false)."""
    return tok.encode(text, special=body.get("add_special_tokens", True) is not False)


def chat_chars(body: Mapping[str, Any]) -> int:
    """Characters of a chat body's message contents (0 when they are malformed: checked later)."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return 0
    return sum(len(content_text(m.get("content"))) for m in messages if isinstance(m, dict))


async def tokenized(tok: Tokenizer, chars: int, fn: Callable[..., list[int]], *args: Any) -> list[int]:
    """``fn(tok, *args)``, in a worker thread when the text is long for ``tok`` (``off_loop_chars``), as
    the engines' API servers do, so one long prompt does not stall every simulated engine's steps."""
    if chars <= tok.off_loop_chars:
        return fn(tok, *args)
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(None, functools.partial(fn, tok, *args))
