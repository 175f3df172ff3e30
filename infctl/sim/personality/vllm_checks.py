"""What vLLM 0.32's API server refuses in a generation request, and how it says so.

Read from vllm 0.32's source (``entrypoints/serve/utils/api_utils.py`` ``validate_json_request`` and
``get_max_tokens``; ``entrypoints/openai/{completion,chat_completion}/protocol.py`` model validators;
``renderers/params.py`` ``TokenizeParams``; ``sampling_params.py`` ``_verify_args``; ``exceptions.py``
``VLLMValidationError``) and checked against the CPU build serving here (``tests/e2e/test_vllm_refusals.py``).
Two kinds of 400 come out of it:

- the request model's own (pydantic) errors, type ``Bad Request``, ``param`` the first error's location
  (``body.max_tokens``), the errors listed in the message. Fields are coerced as pydantic's lax mode does:
  ``"3"``, ``3.0`` and ``true`` are integers, ``"yes"`` a boolean;
- ``VLLMValidationError``: type ``BadRequestError``, the message ending ``(parameter=..., value=...)``.

The checks run in vLLM's order: media type, JSON, the request model, its model validators; then (after the
model name, a 404) the context budget; after tokenizing, the prompt's length and the sampling parameters.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from infctl.sim.personality.http_json import SimHTTPError

MAX_LOGPROBS = 20
"""``--max-logprobs`` default."""

_INT_FIELDS = ("max_tokens", "max_completion_tokens", "n", "seed", "top_k", "top_logprobs")
_FLOAT_FIELDS = ("temperature", "top_p")
_TRUE = frozenset({"1", "on", "t", "true", "y", "yes"})
_FALSE = frozenset({"0", "off", "f", "false", "n", "no"})

_T = TypeVar("_T")

Problem = tuple[str, str, str, Any]
"""A pydantic error: (loc, type, msg, input)."""


def invalid(*errors: Problem) -> SimHTTPError:
    """vLLM's answer to a body its request model rejects: pydantic's errors (loc, type, msg, input) listed
    in the message, the first one's loc as ``param``, type ``Bad Request`` (its RequestValidationError
    handler)."""
    n = len(errors)
    lines = "".join(
        f"\n  {{'type': '{kind}', 'loc': '{loc}', 'msg': '{msg}', 'input': '{_shown(value)}'}}"
        for loc, kind, msg, value in errors
    )
    return SimHTTPError(
        400, f"{n} validation error{'s' if n > 1 else ''}:{lines}", param=errors[0][0], err_type="Bad Request"
    )


def _shown(value: Any) -> str:
    if isinstance(value, dict | list):
        return f"<{type(value).__name__} of {len(value)} items>"
    return str(value)


def refused(message: str, parameter: str | None = None, value: Any = None) -> SimHTTPError:
    """A ``VLLMValidationError``: its message with the parameter and value appended, as its ``__str__``."""
    extras = [f"{k}={v}" for k, v in (("parameter", parameter), ("value", value)) if v is not None]
    text = f"{message} ({', '.join(extras)})" if extras else message
    return SimHTTPError(400, text, param=parameter)


def check_media_type(content_type: str | None) -> None:
    """``validate_json_request``: only ``application/json`` (parameters aside) is read."""
    if (content_type or "").lower().split(";", 1)[0].strip() != "application/json":
        raise SimHTTPError(
            400,
            "1 validation error:\n  Unsupported Media Type: Only 'application/json' is allowed",
            err_type="Bad Request",
        )


def decode(raw: bytes) -> dict[str, Any]:
    """The body as FastAPI reads it for a pydantic model: absent, not JSON, or not an object are 400s."""
    if not raw:
        raise invalid(("body", "missing", "Field required", None))
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        pos = getattr(exc, "pos", 0)
        raise invalid((f"body.{pos}", "json_invalid", "JSON decode error", {})) from None
    if not isinstance(body, dict):
        msg = "Input should be a valid dictionary or object to extract fields from"
        raise invalid(("body", "model_attributes_type", msg, body))
    return body


def validate(body: Mapping[str, Any], *, chat: bool) -> dict[str, Any]:
    """The request model's view of ``body``: fields coerced as pydantic's lax mode does, or its 400s; then
    its model validators (``stream_options``, ``top_logprobs``, an empty prompt)."""
    out = dict(body)
    problems: list[Problem] = []
    for key in _INT_FIELDS:
        _coerce(out, key, _as_int, problems)
    for key in _FLOAT_FIELDS:
        _coerce(out, key, _as_float, problems)
    _coerce(out, "stream", _as_bool, problems)
    _coerce(out, "logprobs", _as_bool if chat else _as_int, problems)
    model = out.get("model")
    if model is not None and not isinstance(model, str):
        problems.append(("body.model", "string_type", "Input should be a valid string", model))
    problems += _messages_problems(out) if chat else _prompt_problems(out.get("prompt"))
    if problems:
        raise invalid(*problems)
    if chat:
        _absent_content(out)
    if out.get("stream_options") and not out.get("stream"):
        raise refused("Stream options can only be defined when `stream=True`.", "stream_options")
    top = out.get("top_logprobs")
    if chat and top is not None and (top == -1 or top > 0) and not out.get("logprobs"):
        raise refused("when using `top_logprobs`, `logprobs` must be set to true.", "top_logprobs")
    if not chat and out.get("prompt") in (None, "") and not out.get("prompt_embeds"):
        raise refused("Either prompt or prompt_embeds must be provided and non-empty.", "prompt")
    return out


def _coerce(body: dict[str, Any], key: str, fn: Any, problems: list[Problem]) -> None:
    value = body.get(key)
    if value is None:
        return
    try:
        body[key] = fn(value)
    except _Bad as bad:
        problems.append((f"body.{key}", bad.kind, bad.msg, value))


class _Bad(Exception):
    def __init__(self, kind: str, msg: str) -> None:
        self.kind, self.msg = kind, msg


def _as_int(value: Any) -> int:
    if isinstance(value, bool | int):
        return int(value)
    if isinstance(value, float):
        if value.is_integer():
            return int(value)
        raise _Bad("int_from_float", "Input should be a valid integer, got a number with a fractional part")
    if isinstance(value, str):
        return _parsed(
            value, int, "int_parsing", "Input should be a valid integer, unable to parse string as an integer"
        )
    raise _Bad("int_type", "Input should be a valid integer")


def _as_float(value: Any) -> float:
    if isinstance(value, bool | int | float):
        return float(value)
    if isinstance(value, str):
        return _parsed(
            value,
            float,
            "float_parsing",
            "Input should be a valid number, unable to parse string as a number",
        )
    raise _Bad("float_type", "Input should be a valid number")


def _parsed(text: str, parse: Callable[[str], _T], kind: str, msg: str) -> _T:
    try:
        return parse(text.strip())
    except ValueError:
        raise _Bad(kind, msg) from None


def _as_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise _Bad("bool_parsing", "Input should be a valid boolean, unable to interpret input")


def _messages_problems(body: Mapping[str, Any]) -> list[Problem]:
    if "messages" not in body:
        return [("body.messages", "missing", "Field required", body)]
    messages = body["messages"]
    if not isinstance(messages, list):
        return [("body.messages", "list_type", "Input should be a valid list", messages)]
    # The first branch of the message union (the developer message) names the first error.
    first = "ChatCompletionDeveloperMessageParam"
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            return [(f"body.messages.{i}.{first}", "dict_type", "Input should be a valid dictionary", m)]
        if "content" in m and m["content"] is None and m.get("role") != "assistant":
            msg = "Input should be a valid string"
            return [(f"body.messages.{i}.{first}.content", "string_type", msg, None)]
    return []


def _absent_content(body: dict[str, Any]) -> None:
    """A message without ``content`` is rendered as one with empty content (seen: the same ids)."""
    messages = body.get("messages")
    if isinstance(messages, list) and any(isinstance(m, dict) and "content" not in m for m in messages):
        body["messages"] = [
            {**m, "content": ""} if isinstance(m, dict) and "content" not in m else m for m in messages
        ]


def _prompt_problems(prompt: Any) -> list[Problem]:
    """``prompt: list[int] | list[list[int]] | str | list[str] | None`` with ids ``>= 0``: the first
    mismatch (vLLM lists one per branch of the union; the first is what ``param`` names)."""
    if prompt is None or isinstance(prompt, str):
        return []
    if not isinstance(prompt, list):
        return [("body.prompt", "list_type", "Input should be a valid list", prompt)]
    for i, item in enumerate(prompt):
        if isinstance(item, str):
            continue
        ids = item if isinstance(item, list) else [item]
        for j, t in enumerate(ids):
            loc = f"body.prompt.{i}" if ids is not item else f"body.prompt.{i}.{j}"
            if not isinstance(t, int) or isinstance(t, bool):
                return [(loc, "int_type", "Input should be a valid integer", t)]
            if t < 0:
                return [(loc, "greater_than_equal", "Input should be greater than or equal to 0", t)]
    return []


UNTRUSTED_TEMPLATE = (
    "Chat template is passed with request, but --trust-request-chat-template is not set. "
    "Refused request with untrusted chat template."
)
"""vLLM 0.32's words (``OnlineRenderer.validate_chat_template``, vllm/renderers/online_renderer.py)."""


def check_chat_template(body: Mapping[str, Any], *, trusted: bool) -> None:
    """``validate_chat_template``: without ``--trust-request-chat-template`` a chat (or ``/tokenize``) request
    carrying its own template, as ``chat_template`` or ``chat_template_kwargs.chat_template`` (any value
    but null, an empty string too), is refused with a 400 before anything is rendered."""
    kwargs = body.get("chat_template_kwargs")
    own = body.get("chat_template") is not None or (
        isinstance(kwargs, dict) and kwargs.get("chat_template") is not None
    )
    if own and not trusted:
        raise SimHTTPError(400, UNTRUSTED_TEMPLATE)


def check_budget(body: Mapping[str, Any], max_model_len: int, *, chat: bool) -> None:
    """``TokenizeParams``: ``max_tokens`` (``max_completion_tokens`` for a chat) may not exceed the
    context, whatever the prompt."""
    wanted = _requested(body, chat)
    if wanted is not None and wanted > max_model_len:
        raise refused(
            f"max_tokens={wanted} cannot be greater than max_model_len={max_model_len}. "
            "Please request fewer output tokens.",
            "max_tokens",
            wanted,
        )


def _requested(body: Mapping[str, Any], chat: bool) -> int | None:
    value = body.get("max_completion_tokens") if chat else None
    value = body.get("max_tokens") if value is None else value
    return value if isinstance(value, int) else None


def max_tokens(body: Mapping[str, Any], prompt_len: int, limit: int, default: int | None, chat: bool) -> int:
    """The tokens a request may generate, or vLLM's 400: a prompt longer than the context is refused;
    otherwise ``get_max_tokens`` clamps what was asked (or ``default``; none: the rest of the context) to
    what the context has left, and ``SamplingParams`` refuses less than one token."""
    if prompt_len > limit:
        qualifier = "at least " if prompt_len == limit + 1 else ""
        raise refused(
            f"This model's maximum context length is {limit} tokens. However, your prompt contains "
            f"{qualifier}{prompt_len} input tokens, which exceeds this limit even without any output "
            "tokens. Please reduce the length of the input prompt.",
            "input_tokens",
            prompt_len,
        )
    wanted = _requested(body, chat)
    candidates = [limit - prompt_len, wanted if wanted is not None else default]
    n = min(v for v in candidates if v is not None)
    if n < 1:
        raise refused(f"max_tokens must be at least 1, got {n}.", "max_tokens", n)
    return n


def check_sampling(body: Mapping[str, Any], *, chat: bool) -> None:
    """``SamplingParams._verify_args`` and ``_validate_logprobs``, for the fields the simulator reads or a
    client commonly sends."""
    n = body.get("n")
    if n is not None and n < 1:
        raise refused(f"n must be at least 1, got {n}.")
    temperature = body.get("temperature")
    if temperature is not None and temperature < 0:
        raise refused(f"temperature must be non-negative, got {temperature}.", "temperature", temperature)
    if temperature is not None and temperature > 2:
        raise refused(f"temperature must be in [0, 2], got {temperature}.", "temperature", temperature)
    top_p = body.get("top_p")
    if top_p is not None and not 0 < top_p <= 1:
        raise refused(f"top_p must be in (0, 1], got {top_p}.", "top_p", top_p)
    top_k = body.get("top_k")
    if top_k is not None and top_k < -1:
        raise refused(f"top_k must be 0 (disable), or at least 1, got {top_k}.")
    wanted = body.get("top_logprobs") if chat else body.get("logprobs")
    if isinstance(wanted, int) and not isinstance(wanted, bool) and (wanted > MAX_LOGPROBS or wanted == -1):
        # -1 asks for the whole vocabulary, always more than the maximum (vLLM names the vocabulary's size).
        shown = "the vocabulary's size" if wanted == -1 else wanted
        raise refused(
            f"Requested sample logprobs of {shown}, which is greater than max allowed: {MAX_LOGPROBS}",
            "logprobs",
            shown,
        )
