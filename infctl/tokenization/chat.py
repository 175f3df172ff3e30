"""Chat templates rendered the way the engines render them for ``/v1/chat/completions``.

vLLM and SGLang both hand the request's messages to the Hugging Face chat template (Jinja2) of the model and
tokenize the resulting text without adding special tokens again. This module reproduces that rendering:
the same sandboxed environment options (``trim_blocks``, ``lstrip_blocks``, loop controls), the same
variables (``messages``, ``tools``, ``add_generation_prompt``, the special tokens, the request's
``chat_template_kwargs``), the helpers templates call (``raise_exception``, ``strftime_now``, ``tojson``),
and vLLM's message preparation (``_parse_chat_message_content`` and ``_postprocess_messages`` in
``vllm/renderers/chat_utils.py``, 0.32): each message rebuilt from the fields vLLM passes on (so a template's
``is defined`` tests see what vLLM's see), a missing or null ``content`` rendered as an empty string (an
empty list of parts for templates that loop over parts), text parts joined by newlines for templates that
read ``content`` as a string, and an assistant's tool-call arguments parsed from JSON so templates can
iterate them; ``developer`` messages turned ``system`` for a template that does not name that role
(``safe_apply_chat_template``, ``vllm/renderers/hf.py``); the request's ``tools`` as vLLM's models dump
them and its ``chat_template_kwargs`` as vLLM merges them, with its ``reasoning_effort``
(:func:`request_tools`, :func:`template_kwargs`).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import jinja2
import jinja2.ext
import jinja2.sandbox

from infctl.tokenization.base import TokenizerError, content_text

_PARTS_LOOP = re.compile(r"for\s+\w+\s+in\s+\w+(?:\[\s*['\"]content['\"]\s*\]|\.content)")
"""A template that loops over a message's content expects OpenAI content parts, not a string (vLLM decides
the same way, by reading the template)."""
_DEVELOPER_NAMED = ('"developer"', "'developer'")
"""A template that names the ``developer`` role, quoted (vLLM 0.32 ``_detect_developer_role_support``), gets
developer messages as they are; any other gets them as ``system`` messages."""
_UNSET = (None, "auto")
"""``chat_template_kwargs`` values vLLM drops (``merge_kwargs``' ``unset_values``): the template sees them
undefined."""


class _Generation(jinja2.ext.Extension):
    """``{% generation %}...{% endgeneration %}`` marks assistant text for training masks; rendering keeps
    the body as is."""

    tags = {"generation"}  # noqa: RUF012 (jinja2 declares it an instance attribute)

    def parse(self, parser: Any) -> Any:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.Scope(body).set_lineno(lineno)


def _raise(message: str) -> None:
    raise jinja2.TemplateError(message)


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    # transformers' signature exactly (chat_template_utils._cached_compile_jinja_template, 5.x): a template
    # may come with the request, and json.dumps' other arguments (``default``, ``cls``) would call what
    # the template hands them outside the sandbox's checks.
    return json.dumps(
        value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


class ChatTemplate:
    """One compiled chat template and the special tokens it is rendered with.

    Compiled in the environment transformers compiles every template in (vLLM renders with it, the
    request's own ``chat_template`` included): Jinja's ``ImmutableSandboxedEnvironment``, so a template
    can neither reach Python internals (underscore attributes, ``str.format`` tricks) nor change the
    messages, and the same three helpers. A template is code from whoever wrote it: the sandbox bounds what
    it can reach, not how long it runs (``range`` is capped at 100,000 items, loops can still nest)."""

    def __init__(self, source: str, special_tokens: Mapping[str, str]) -> None:
        env = jinja2.sandbox.ImmutableSandboxedEnvironment(
            trim_blocks=True, lstrip_blocks=True, extensions=[_Generation, jinja2.ext.loopcontrols]
        )
        env.filters["tojson"] = _tojson
        env.globals["raise_exception"] = _raise
        env.globals["strftime_now"] = _strftime_now
        try:
            self._template = env.from_string(source)
        except jinja2.TemplateSyntaxError as exc:
            raise TokenizerError(f"the chat template does not compile: {exc} (line {exc.lineno})") from None
        self.source = source
        self.parts = bool(_PARTS_LOOP.search(source))
        self.developer = any(quoted in source for quoted in _DEVELOPER_NAMED)
        self.special_tokens = dict(special_tokens)

    def render(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: object = None,
        add_generation_prompt: bool = True,
        continue_final_message: bool = False,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        parts: bool | None = None,
    ) -> str:
        """The prompt text the engine tokenizes. A template error (``raise_exception``, a bad variable)
        is a TokenizerError: the engine answers such a request with a 400 too. ``tools`` and
        ``chat_template_kwargs`` as the template sees them (:func:`request_tools`, :func:`template_kwargs`);
        ``parts``: whether contents are handed on as parts (default: as this template reads them)."""
        prepared = [self._prepare(m, self.parts if parts is None else parts) for m in messages]
        if not self.developer and any(m["role"] == "developer" for m in prepared):
            prepared = _developer_as_system(prepared)
        if continue_final_message and add_generation_prompt:
            raise TokenizerError("continue_final_message and add_generation_prompt are mutually exclusive")
        variables: dict[str, Any] = dict(self.special_tokens, documents=None)  # transformers' variables
        if chat_template_kwargs:
            variables.update(chat_template_kwargs)
        variables.update(messages=prepared, tools=tools, add_generation_prompt=add_generation_prompt)
        try:
            text = self._template.render(**variables)
        except jinja2.TemplateError as exc:
            raise TokenizerError(f"the chat template refused the messages: {exc}") from None
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            raise TokenizerError(f"the chat template failed on the messages: {exc}") from None
        if continue_final_message:
            text = _cut_after_final(text, prepared[-1])
        return text

    def _prepare(self, message: Mapping[str, Any], as_parts: bool) -> dict[str, Any]:
        """The message as vLLM hands it to the template: role, content and the fields its role carries,
        nothing else (an OpenAI client's ``refusal: null`` or ``tool_calls: null`` stays undefined)."""
        role, content = message["role"], message.get("content")
        out: dict[str, Any] = {"role": role}
        if isinstance(content, str) and as_parts:
            out["content"] = [{"type": "text", "text": content}]
        elif as_parts:
            out["content"] = content or []
        else:
            out["content"] = content_text(content)  # None: "" (vLLM joins no text parts)
        if role == "assistant":
            calls = message.get("tool_calls")
            if isinstance(calls, list):
                calls = _parsed_calls(calls) or None  # no calls: the template's plain assistant path
            if calls is not None:
                out["tool_calls"] = calls
            if message.get("reasoning") is not None:
                out["reasoning"] = out["reasoning_content"] = message["reasoning"]
        elif role == "tool":
            if "tool_call_id" in message:
                out["tool_call_id"] = message["tool_call_id"]
            parts = out["content"]
            if isinstance(parts, list) and all(map(_is_text, parts)):
                out["content"] = content_text(parts)  # templates take a tool result as a string
        for key in ("name", "task"):
            if isinstance(message.get(key), str):
                out[key] = message[key]
        if role == "developer":
            out["tools"] = message.get("tools")
        return out


def _developer_as_system(prepared: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """vLLM 0.32's ``_convert_developer_to_system`` then ``_consolidate_system_messages``: each developer
    message becomes a system message without its ``tools``; then, if a system message is not first or
    there are several, all of them become one first system message holding only their non-empty contents
    (text parts joined by newlines), joined by blank lines: a string even for a template that reads parts."""
    converted = [
        {**{k: v for k, v in m.items() if k != "tools"}, "role": "system"} if m["role"] == "developer" else m
        for m in prepared
    ]
    systems = [i for i, m in enumerate(converted) if m["role"] == "system"]
    if not systems or systems == [0]:
        return converted
    texts = (content_text(converted[i]["content"]) for i in systems)
    merged = {"role": "system", "content": "\n\n".join(t for t in texts if t)}
    return [merged, *(m for m in converted if m["role"] != "system")]


def template_kwargs(kwargs: object, reasoning_effort: object = None) -> dict[str, Any]:
    """A request's ``chat_template_kwargs`` as vLLM 0.32 hands them on (``ChatParams.with_defaults``): a None
    or ``"auto"`` value dropped. TokenizerError unless an object (vLLM's 400: a valid dictionary).

    ``reasoning_effort``, the chat request's field (not None), is a template variable too, over the
    kwargs' own, and sets ``enable_thinking`` to whether it is not ``"none"`` unless the kwargs carry that
    key, whatever its value (vLLM 0.32 ``ChatCompletionRequest.build_chat_params``,
    entrypoints/openai/chat_completion/protocol.py: ``"enable_thinking" not in user_kwargs``). Only the
    chat route reads the field: vLLM's ``/tokenize`` request has none."""
    if kwargs is None:
        kwargs = {}
    if not isinstance(kwargs, dict):
        raise TokenizerError("'chat_template_kwargs' must be an object")
    out = {k: v for k, v in kwargs.items() if v not in _UNSET}
    if reasoning_effort is not None:
        out["reasoning_effort"] = reasoning_effort
        if "enable_thinking" not in kwargs:
            out["enable_thinking"] = reasoning_effort != "none"
    return out


def request_tools(tools: object) -> object:
    """A request's ``tools`` as vLLM 0.32 hands them to the template: each parsed into
    ``ChatCompletionToolsParam`` and dumped (``tool.model_dump()`` in ``OnlineRenderer.render_chat``), so
    a function has exactly ``name``, ``description`` and ``parameters`` (null when not sent), then
    ``strict`` and ``defer_loading`` when set, and no other key (``FunctionDefinition._serialize``). A
    template's ``tools | tojson`` writes them so. Anything else is handed on as sent (vLLM refuses it)."""
    if not isinstance(tools, list):
        return tools
    return [_tool(t) for t in tools]


def _tool(tool: object) -> object:
    fn = tool.get("function") if isinstance(tool, dict) else None
    if not isinstance(tool, dict) or not isinstance(fn, dict):
        return tool
    defer = tool.get("defer_loading")
    out_fn = {k: fn.get(k) for k in ("name", "description", "parameters")}
    if fn.get("strict") is not None:
        out_fn["strict"] = fn["strict"]
    fn_defer = defer if fn.get("defer_loading") is None else fn["defer_loading"]  # the tool's, passed on
    if fn_defer is not None:
        out_fn["defer_loading"] = fn_defer
    out: dict[str, Any] = {"type": tool.get("type", "function"), "function": out_fn}
    if defer is not None:
        out["defer_loading"] = defer
    return out


def _is_text(part: object) -> bool:
    return isinstance(part, dict) and part.get("type") == "text"


def _parsed_calls(calls: list[object]) -> list[dict[str, Any]]:
    """Tool calls with ``function.arguments`` a mapping, as vLLM hands them to templates: JSON text parsed,
    and empty, unparsable or non-object arguments ``{}`` (vLLM coerces them so a conversation with one bad
    call in its history stays servable). A call that is not a function call is refused, as vLLM does."""
    out = []
    for call in calls:
        if not isinstance(call, dict):
            raise TokenizerError("assistant tool_calls entries must be objects")
        fn = call.get("function")
        if call.get("type", "function") != "function" or not isinstance(fn, dict):
            raise TokenizerError("chat completions only support assistant tool_calls of type 'function'")
        args = fn.get("arguments")
        if args and not isinstance(args, dict):
            parsed: object = None
            if isinstance(args, str):
                with contextlib.suppress(ValueError):
                    parsed = json.loads(args)
            args = parsed
        out.append({**call, "function": {**fn, "arguments": args if isinstance(args, dict) else {}}})
    return out


def _cut_after_final(text: str, final: Mapping[str, Any]) -> str:
    """``continue_final_message``: the prompt ends where the last message's content ends."""
    content = content_text(final.get("content")).strip()
    at = text.rfind(content) if content else -1
    if at < 0:
        raise TokenizerError("continue_final_message: the final message's content is not in the rendering")
    return text[: at + len(content)]
