"""The interface every tokenizer implements, and the request-shape rules they share.

A tokenizer answers what the engine would see: the token ids of a completion prompt, and of a chat
conversation rendered by the model's chat template. ``exact`` says whether those ids are the engine's own
(the model's tokenizer) or a stand-in (the simulator's words, the language-independent estimate): prefix
routing works on either, but only exact ids can be matched against an engine's KV events.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

from infctl.errors import InfctlError

CHAT_OPTIONS = (
    "tools",
    "add_generation_prompt",
    "continue_final_message",
    "add_special_tokens",
    "chat_template_kwargs",
    "chat_template",
    "reasoning_effort",
)
"""Request fields that change what a chat prompt renders to (vLLM's names). ``chat_template``, the
request's own template, is served by vLLM only with ``--trust-request-chat-template`` (else a 400).
``reasoning_effort`` is read by vLLM's chat route only (a template variable, and ``enable_thinking``:
``chat.template_kwargs``), not by its ``/tokenize``."""


def chat_options(body: Mapping[str, Any], *, own_template: bool = True) -> dict[str, Any]:
    """The request's chat-template options (``CHAT_OPTIONS``), for ``Tokenizer.chat_ids``. ``own_template``
    False leaves out the request's own template (``chat_template``, and ``chat_template_kwargs``' one): the
    model's renders, as where request templates are not trusted."""
    options = {k: body[k] for k in CHAT_OPTIONS if k in body}
    if not own_template:
        options.pop("chat_template", None)
        kwargs = options.get("chat_template_kwargs")
        if isinstance(kwargs, dict) and "chat_template" in kwargs:
            options["chat_template_kwargs"] = {k: v for k, v in kwargs.items() if k != "chat_template"}
    return options


FALLBACK = (
    "name a model directory holding tokenizer.json (or the file itself), or use --tokenizer estimate "
    "(counts by bytes and characters; no files)"
)
"""The fix a tokenizer that does not load suggests: the right files, or the estimate."""


class TokenizerError(InfctlError):
    """A tokenizer could not be loaded, or a prompt could not be tokenized (bad chat messages)."""

    exit_code = 2


class Tokenizer(ABC):
    """Prompt token ids as an engine computes them for ``/v1/completions`` and ``/v1/chat/completions``."""

    name: str = ""
    """What this is, for logs and ``doctor``: ``hf:PATH``, ``estimate``, ``words``."""
    exact: bool = False
    """True when the ids are the model's own (they match the engine's counts and KV events)."""
    off_loop_chars: int = 8192
    """Prompts longer than this (characters) cost more than a fraction of a millisecond to tokenize: a
    server runs them in a worker thread rather than on its event loop."""

    @property
    def largest_id(self) -> int | None:
        """The vocabulary's largest token id (added tokens included), for a tokenizer that has the model's
        vocabulary (:class:`HFTokenizer`); None for the others (the estimate, the simulator's words, an
        engine's ``/tokenize``), which know no vocabulary."""
        return None

    @abstractmethod
    def encode(self, text: str, *, special: bool = True) -> list[int]:
        """Ids of a completion prompt. ``special`` adds what the engine adds by default (a BOS token),
        as vLLM's ``add_special_tokens`` does."""

    def count(self, text: str, *, special: bool = True) -> int:
        """``len(encode(text))``; implementations may count without building the ids."""
        return len(self.encode(text, special=special))

    @abstractmethod
    def chat_ids(self, messages: Sequence[Mapping[str, Any]], **options: Any) -> list[int]:
        """Ids of a chat request's prompt: the messages rendered as the engine renders them. ``options`` are
        the request's template options (``tools``, ``add_generation_prompt``, ``continue_final_message``,
        ``add_special_tokens``, ``chat_template_kwargs``, ``chat_template``, ``reasoning_effort``); unknown
        ones are ignored, and a tokenizer that renders no template (words, the estimate) ignores
        ``chat_template`` and ``reasoning_effort`` too."""


def check_messages(messages: object) -> list[Mapping[str, Any]]:
    """The request's ``messages`` as a non-empty list of objects with a role, or a TokenizerError saying
    which entry is wrong (the router answers it with a 400, as the engines do)."""
    if not isinstance(messages, list) or not messages:
        raise TokenizerError("'messages' must be a non-empty list of messages")
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise TokenizerError(f"messages[{i}] must be an object")
        if not isinstance(m.get("role"), str):
            raise TokenizerError(f"messages[{i}].role must be a string")
        content = m.get("content")
        if content is not None and not isinstance(content, str | list):
            raise TokenizerError(f"messages[{i}].content must be a string or a list of content parts")
        if isinstance(content, list):
            for j, part in enumerate(content):
                if not isinstance(part, dict) or not isinstance(part.get("type", "text"), str):
                    raise TokenizerError(f"messages[{i}].content[{j}] must be an object with a 'type'")
    return messages


def content_text(content: object) -> str:
    """The text of a message's content as vLLM hands it to a string-format chat template: a string as is,
    text parts joined by newlines. Other parts (images, audio) add placeholder tokens that depend on the
    model's processor: they are not counted here."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and "text" in p)
    return ""


def message_text(message: Mapping[str, Any]) -> str:
    """The text a chat template writes of a message besides its role: the content's text and each tool
    call's function name and arguments (JSON text as sent). What the length bound and the estimate read:
    an agent's assistant turn is often all tool call, its ``content`` null."""
    text = content_text(message.get("content"))
    calls = message.get("tool_calls")
    if not isinstance(calls, list):
        return text
    out = [text] if text else []
    for call in calls:
        fn = call.get("function") if isinstance(call, dict) else None
        if isinstance(fn, dict):
            args = fn.get("arguments")
            out.append(f"{fn.get('name', '')} {args if isinstance(args, str) else json.dumps(args)}")
    return "\n".join(out)
