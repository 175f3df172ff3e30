"""Continuing a stream its backend broke, as pure functions: what the client was sent, whether the request can
go on elsewhere, the request that goes on from there, and the continuation's events as the client's stream.

When an engine dies mid-stream (connection reset, EOF before the terminating chunk, read timeout) the router
sends the request again to another backend with the text already streamed appended to the prompt
(completions: ``prompt + text``; chat: a final assistant message holding the text, with
``continue_final_message: true, add_generation_prompt: false``, which vLLM and SGLang both take), the token
budget (``max_tokens``, ``max_completion_tokens``, ``min_tokens``) reduced by the tokens already sent, every
other field (``seed``, ``temperature``, ``stop``...) unchanged. Its events reach the client under the original
response's ``id`` and ``created``, without the continuation's role chunk, with ``usage`` merged (prompt
tokens the original request's, completion tokens the sum). Greedy sampling continues exactly as the broken
engine would have; seeded or random sampling continues with a plausible text (the seed's sequence restarts).

What cannot be continued ends with an in-band error event (``error_event``: the OpenAI SDK raises
``APIError`` on a ``data: {"error": ...}`` event) and ``data: [DONE]``; see ``uncontinuable`` and
``Sent.obstacle``. The token counts come from the router's tokenizer (exact with the model's own).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from infctl.engines.base import COMPLETIONS_DEFAULT_MAX_TOKENS

DONE = b"data: [DONE]\n\n"
_STRUCTURED = ("guided_json", "guided_regex", "guided_choice", "guided_grammar", "structured_outputs")


def uncontinuable(body: Mapping[str, Any], *, chat: bool) -> str | None:
    """Why a stream of this request could not be continued on another backend (None: it could)."""
    if _int(body.get("n"), 1) > 1 or _int(body.get("best_of"), 1) > 1:
        return "it asks for several choices (n or best_of)"
    logprobs = body.get("logprobs")
    if logprobs is True or _int(logprobs, -1) >= 0 or body.get("top_logprobs") or body.get("prompt_logprobs"):
        return "it asks for logprobs"
    if body.get("echo") or body.get("suffix"):
        return "it asks for echo or a suffix"
    fmt = body.get("response_format")
    if (isinstance(fmt, Mapping) and fmt.get("type") not in (None, "text")) or any(
        body.get(k) is not None for k in _STRUCTURED
    ):
        return "structured output would restart its grammar"
    if chat:
        if body.get("tools") and body.get("tool_choice") != "none":
            return "a tool call cannot be resumed mid-stream"
        messages = body.get("messages")
        last = messages[-1] if isinstance(messages, list) and messages else None
        if body.get("continue_final_message") and not (
            isinstance(last, Mapping) and isinstance(last.get("content"), str)
        ):
            return "its final message is not text"
        return None
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1:
        prompt = prompt[0]
    if not isinstance(prompt, str):
        return "its prompt is token ids or a batch"
    return None


@dataclass
class Sent:
    """What the client has been sent of one stream (the original's events, then any continuation's)."""

    text: str = ""
    """The generated text, concatenated."""
    head: dict[str, Any] = field(default_factory=dict)
    """``id``, ``object``, ``created`` and ``model`` of the original response's first chunk."""
    finish_reason: str | None = None
    done: bool = False
    """``data: [DONE]`` was sent."""
    usage: bool = False
    """A chunk carrying ``usage`` was sent."""
    error: bool = False
    """An error event was sent (the engine's own)."""
    obstacle: str | None = None
    """What in the stream so far prevents continuing it (tool calls, reasoning, logprobs, other choices)."""
    whole: bool = True
    """The bytes end at an event boundary (else the client holds half an event: nothing can follow)."""

    @property
    def finished(self) -> bool:
        """The generation itself ended: only the stream's closing events can be missing."""
        return self.finish_reason is not None or self.done or self.error

    def add(self, chunk: Mapping[str, Any], *, chat: bool) -> None:
        """Account for one event's JSON object."""
        if "error" in chunk:
            self.error = True
            return
        if not self.head and "id" in chunk:
            self.head = {k: chunk[k] for k in ("id", "object", "created", "model") if k in chunk}
        if chunk.get("usage"):
            self.usage = True
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, Mapping):
                continue
            if choice.get("index", 0) != 0:
                self.obstacle = "it streams several choices"
            if choice.get("logprobs") is not None:
                self.obstacle = "it streams logprobs"
            if chat:
                delta = choice.get("delta") or {}
                if delta.get("tool_calls"):
                    self.obstacle = "a tool call cannot be resumed mid-stream"
                if delta.get("reasoning_content") or delta.get("reasoning"):
                    self.obstacle = "reasoning streamed apart from the content cannot be resumed"
                text = delta.get("content")
            else:
                text = choice.get("text")
            if isinstance(text, str):
                self.text += text
            if choice.get("finish_reason") is not None:
                self.finish_reason = str(choice["finish_reason"])


def read_sent(kept: list[bytes], *, chunked: bool, chat: bool) -> Sent:
    """What the client has, from the body bytes it was given (with the upstream's chunked framing when
    ``chunked``). Decoded only once a stream has broken: the relay keeps bytes, never parses them."""
    data = b"".join(kept)
    sent = Sent()
    if chunked:
        data, complete = dechunk(data)
        if not complete:
            sent.whole = False
    events = data.replace(b"\r\n", b"\n").split(b"\n\n")
    if events[-1].strip():
        sent.whole = False  # half an event
    for event in events[:-1]:
        payload = data_of(event)
        if payload is None:
            continue
        if payload.strip() == b"[DONE]":
            sent.done = True
            continue
        try:
            chunk = json.loads(payload)
        except (UnicodeDecodeError, json.JSONDecodeError):
            sent.obstacle = "its events are not JSON"
            continue
        if isinstance(chunk, dict):
            sent.add(chunk, chat=chat)
    return sent


def continuation_body(body: Mapping[str, Any], *, chat: bool, text: str, sent_tokens: int) -> dict[str, Any]:
    """The request that continues ``body``'s generation after ``text`` (``sent_tokens`` tokens) was sent."""
    out = copy.deepcopy(dict(body))
    if chat:
        messages = out["messages"]
        if out.get("continue_final_message"):
            messages[-1]["content"] += text
        else:
            messages.append({"role": "assistant", "content": text})
        out["continue_final_message"], out["add_generation_prompt"] = True, False
    else:
        prompt = out["prompt"]
        out["prompt"] = [prompt[0] + text] if isinstance(prompt, list) else prompt + text
    budget = remaining_tokens(body, chat=chat, sent_tokens=sent_tokens)
    if budget is not None:
        key = "max_completion_tokens" if "max_completion_tokens" in body else "max_tokens"
        out[key] = budget
    if isinstance(body.get("min_tokens"), int):
        out["min_tokens"] = max(0, body["min_tokens"] - sent_tokens)
    return out


def remaining_tokens(body: Mapping[str, Any], *, chat: bool, sent_tokens: int) -> int | None:
    """Tokens the continuation may still generate (None: the engine's own limit, a chat without one)."""
    limit = body.get("max_completion_tokens", body.get("max_tokens"))
    if not isinstance(limit, int) or isinstance(limit, bool):
        if chat:
            return None
        limit = COMPLETIONS_DEFAULT_MAX_TOKENS
    return limit - sent_tokens


class Rewriter:
    """A continuation's whole events in, the client's bytes out: the original's ``id`` and ``created``, the
    role chunk dropped, ``usage`` merged. What it passes on is added to ``sent`` (a continuation may break
    too, and the next one goes on from there)."""

    def __init__(self, sent: Sent, *, chat: bool) -> None:
        self.sent, self.chat = sent, chat
        self.sent_tokens = 0
        """Tokens sent before the current continuation (set before each one)."""

    def events(self, data: bytes) -> bytes:
        out: list[bytes] = []
        for event in data.replace(b"\r\n", b"\n").split(b"\n\n"):
            if not event.strip():
                continue
            payload = data_of(event)
            if payload is None:
                out.append(event + b"\n\n")  # comments and other fields pass as they are
                continue
            if payload.strip() == b"[DONE]":
                self.sent.done = True
                out.append(DONE)
                continue
            try:
                chunk = json.loads(payload)
            except (UnicodeDecodeError, json.JSONDecodeError):
                out.append(event + b"\n\n")
                continue
            if isinstance(chunk, dict):
                if not self._rewrite(chunk):
                    continue
                self.sent.add(chunk, chat=self.chat)
            out.append(b"data: " + _json(chunk) + b"\n\n")
        return b"".join(out)

    def _rewrite(self, chunk: dict[str, Any]) -> bool:
        """Rewrite ``chunk`` in place; False to drop it (the continuation's role chunk)."""
        if "error" in chunk:
            return True
        for key in ("id", "created"):
            if key in self.sent.head and key in chunk:
                chunk[key] = self.sent.head[key]
        choices = chunk.get("choices") or []
        first = choices[0] if choices and isinstance(choices[0], dict) else {}
        delta = first.get("delta")
        if self.chat and isinstance(delta, dict) and "role" in delta:
            if role_only(chunk) and not chunk.get("usage"):
                return False
            del delta["role"]
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            chunk["usage"] = merged_usage(usage, self.sent_tokens)
        return True


def merged_usage(usage: Mapping[str, Any], sent_tokens: int) -> dict[str, Any]:
    """A continuation's ``usage`` as the whole request's: its prompt held the ``sent_tokens`` already sent,
    which count as completion tokens instead (the total is unchanged)."""
    out = dict(usage)
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if isinstance(prompt, int) and isinstance(completion, int):
        moved = min(sent_tokens, prompt)
        out["prompt_tokens"], out["completion_tokens"] = prompt - moved, completion + moved
        details = usage.get("prompt_tokens_details")
        if isinstance(details, dict) and isinstance(details.get("cached_tokens"), int):
            out["prompt_tokens_details"] = {
                **details,
                "cached_tokens": min(details["cached_tokens"], prompt - moved),
            }
    return out


def closing_events(
    sent: Sent, *, chat: bool, include_usage: bool, prompt_tokens: int, sent_tokens: int
) -> bytes:
    """The end of a stream whose generation had ended (or used its whole budget) when its backend broke:
    the final chunk if it was missing, the usage chunk if asked for and missing, ``[DONE]``."""
    out: list[bytes] = []
    head = dict(sent.head)
    if not sent.finished:
        choice: dict[str, Any] = {"index": 0, "logprobs": None, "finish_reason": "length"}
        choice.update({"delta": {"content": ""}} if chat else {"text": "", "stop_reason": None})
        out.append(b"data: " + _json({**head, "choices": [choice]}) + b"\n\n")
    if include_usage and not sent.usage and not sent.error:
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": sent_tokens,
            "total_tokens": prompt_tokens + sent_tokens,
        }
        out.append(b"data: " + _json({**head, "choices": [], "usage": usage}) + b"\n\n")
    if not sent.done:
        out.append(DONE)
    return b"".join(out)


def error_event(message: str, *, kind: str = "BadGatewayError", code: int = 502) -> bytes:
    """An in-band error in the shape vLLM streams one (the OpenAI SDK raises ``APIError`` with its
    message), then ``[DONE]``."""
    error = {"message": message, "type": kind, "param": None, "code": code}
    return b"data: " + _json({"error": error}) + b"\n\n" + DONE


def role_only(chunk: Mapping[str, Any]) -> bool:
    """A chat chunk that only opens its choices: each a delta with the role and nothing else said (empty
    content, no tool calls), unfinished. vLLM and SGLang open every chat stream with one per choice."""
    choices = chunk.get("choices")
    if not isinstance(choices, list) or not choices:
        return False
    for choice in choices:
        delta = choice.get("delta") if isinstance(choice, Mapping) else None
        if not isinstance(delta, Mapping) or "role" not in delta or choice.get("finish_reason") is not None:
            return False
        if any(value for key, value in delta.items() if key != "role"):
            return False
    return True


def error_status(chunk: Mapping[str, Any]) -> int | None:
    """The status an in-band error event carries: vLLM's ``{"error": {..., "code": 500}}``, SGLang's
    (its flat error body under ``error``: ``create_streaming_error_response``) or that flat body alone.
    None: not an error event; 0: an error without a status."""
    error = chunk.get("error")
    if isinstance(error, Mapping):
        code = error.get("code")
    elif error is not None:
        code = None
    elif chunk.get("object") == "error":
        code = chunk.get("code")
    else:
        return None
    return code if isinstance(code, int) and not isinstance(code, bool) else 0


def include_usage(body: Mapping[str, Any]) -> bool:
    options = body.get("stream_options")
    return isinstance(options, Mapping) and bool(options.get("include_usage"))


def data_of(event: bytes) -> bytes | None:
    """The ``data`` field of one event (lines joined), None when it has none."""
    lines = [line[5:].removeprefix(b" ") for line in event.split(b"\n") if line.startswith(b"data:")]
    return b"\n".join(lines) if lines else None


def dechunk(data: bytes) -> tuple[bytes, bool]:
    """(the content of chunked ``data``, whether it ends at a chunk boundary)."""
    parts: list[bytes] = []
    i, n = 0, len(data)
    while i < n:
        j = data.find(b"\r\n", i)
        if j < 0:
            return b"".join(parts), False
        try:
            size = int(data[i:j].split(b";", 1)[0], 16)
        except ValueError:
            return b"".join(parts), False
        start, end = j + 2, j + 2 + size
        if end + 2 > n:
            return b"".join(parts), False
        parts.append(data[start:end])
        i = end + 2
    return b"".join(parts), True


def _int(value: object, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _json(obj: object) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()
