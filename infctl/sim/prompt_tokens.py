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
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from infctl.sim.personality.http_json import SimHTTPError
from infctl.tokenization import Tokenizer, TokenizerError, chat_options, message_text


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


def chat_ids(
    tok: Tokenizer, body: Mapping[str, Any], own_template: bool = False, effort: bool = False
) -> list[int]:
    """Token ids of a chat request's prompt (its ``messages`` and template options; its own
    ``chat_template``, or ``chat_template_kwargs``' one, only with ``own_template``, an engine that
    renders it; its ``reasoning_effort`` only with ``effort``, a route that reads it: vLLM's chat route,
    not its ``/tokenize``)."""
    messages = messages_of(body)
    options = chat_options(body, own_template=own_template)
    if not effort:
        options.pop("reasoning_effort", None)
    try:
        return tok.chat_ids(messages, **options)
    except TokenizerError as exc:
        raise SimHTTPError(400, exc.message, param="messages") from None


def text_ids(tok: Tokenizer, text: str, body: Mapping[str, Any]) -> list[int]:
    """Token ids of a completion prompt's text (special tokens unless ``add_special_tokens`` is false)."""
    return tok.encode(text, special=body.get("add_special_tokens", True) is not False)


def chat_chars(body: Mapping[str, Any]) -> int:
    """Characters of a chat body's message contents and tool calls (0 when they are malformed: checked
    later)."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return 0
    return sum(len(message_text(m)) for m in messages if isinstance(m, dict))


async def tokenized(tok: Tokenizer, chars: int, fn: Callable[..., list[int]], *args: Any) -> list[int]:
    """``fn(tok, *args)``, in a worker thread when the text is long for ``tok`` (``off_loop_chars``), as
    the engines' API servers do, so one long prompt does not stall every simulated engine's steps."""
    if chars <= tok.off_loop_chars:
        return fn(tok, *args)
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(None, functools.partial(fn, tok, *args))


def largest_token_id(tok: Tokenizer) -> int | None:
    """The largest prompt token id the model accepts, when ``tok`` is the model's own tokenizer (``hf:PATH``):
    the larger of the tokenizer's largest id (``Tokenizer.largest_id``, added tokens included) and the
    model's ``vocab_size`` - 1 (its config.json beside tokenizer.json), as vLLM 0.32 bounds them
    (``validate_token_ids`` in vllm/renderers/base.py: "Token id N is out of vocabulary" past it).

    None for the other tokenizers (words, estimate, an engine's ``/tokenize``): no vocabulary is known, so
    every id is served. The words convention's ids are CRC-32s of words (``infctl.tokens``), anywhere in
    0..2**32-1, and no model stands behind them whose bound a request could be held to."""
    largest = tok.largest_id
    if largest is None or not tok.name.startswith("hf:"):
        return largest
    size = _vocab_size(tok.name.removeprefix("hf:"))
    return largest if size is None else max(largest, size - 1)


@functools.cache
def _vocab_size(where: str) -> int | None:
    """The model's ``vocab_size`` in the config.json beside its tokenizer.json (None: no such file or key)."""
    path = Path(where)
    file = path / "tokenizer.json" if path.is_dir() else path
    try:
        config = json.loads((file.parent / "config.json").read_text())
    except (OSError, ValueError):
        return None
    # vLLM's hf_text_config: a multimodal model's language model.
    text = (config.get("text_config") or config) if isinstance(config, dict) else None
    size = text.get("vocab_size") if isinstance(text, dict) else None
    return size if isinstance(size, int) else None
