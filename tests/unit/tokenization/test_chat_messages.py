"""Chat messages reach the template as vLLM hands them over: agent traffic (an assistant turn that is only
tool calls, ``content: null``; tool results; OpenAI clients echoing ``refusal: null``) renders as the engine
renders it, rather than failing the router with a 400 for a request the engine serves."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tokenizerkit import CHAT_TEMPLATE, IM_END, IM_START, tiny_tokenizer

from infctl.tokenization import EstimateTokenizer, TokenizerError, load_tokenizer
from infctl.tokenization.chat import ChatTemplate, request_tools, template_kwargs

__all__ = ["tiny_tokenizer"]

PARIS = '{"city": "Paris"}'
CALL: dict[str, Any] = {"id": "c1", "type": "function", "function": {"name": "get", "arguments": PARIS}}
AGENT: list[dict[str, Any]] = [
    {"role": "user", "content": "weather?", "tool_calls": None},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [CALL, {"id": "c2", "type": "function", "function": {"name": "bad", "arguments": "{"}}],
        "refusal": None,
    },
    {
        "role": "tool",
        "tool_call_id": "c1",
        "name": "get",
        "content": [{"type": "text", "text": "sunny"}, {"type": "text", "text": "20C"}],
    },
    {"role": "assistant", "tool_calls": []},
    {"role": "assistant"},
]
"""Both formats' expectations below are what vLLM 0.32's ``parse_chat_messages`` (renderers/chat_utils.py)
returned for these messages, run on this machine: only the fields vLLM passes on, a null or missing content
empty, arguments parsed (unparsable ones ``{}``), tool-result parts joined, no calls no ``tool_calls``."""
_CALLS = [
    {"id": "c1", "type": "function", "function": {"name": "get", "arguments": {"city": "Paris"}}},
    {"id": "c2", "type": "function", "function": {"name": "bad", "arguments": {}}},
]
VLLM_STRING = [
    {"role": "user", "content": "weather?"},
    {"role": "assistant", "content": "", "tool_calls": _CALLS},
    {"role": "tool", "content": "sunny\n20C", "tool_call_id": "c1", "name": "get"},
    {"role": "assistant", "content": ""},
    {"role": "assistant", "content": ""},
]
VLLM_OPENAI = [
    {"role": "user", "content": [{"type": "text", "text": "weather?"}]},
    {"role": "assistant", "content": [], "tool_calls": _CALLS},
    {"role": "tool", "content": "sunny\n20C", "tool_call_id": "c1", "name": "get"},
    {"role": "assistant", "content": []},
    {"role": "assistant", "content": []},
]
PARTS_LOOP = "{% for m in messages %}{% for p in m.content %}{% endfor %}{% endfor %}"

TOOL_TEMPLATE = (
    "{%- for m in messages %}"
    "{%- if m.role == 'assistant' and m.tool_calls is defined %}"
    "{{- '<|im_start|>assistant\\n' + m.content }}"
    "{%- for c in m.tool_calls %}"
    "{{- '<tool_call>' + {'name': c.function.name, 'arguments': c.function.arguments} | tojson }}"
    "{{- '</tool_call>' }}"
    "{%- endfor %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- elif m.role == 'tool' %}"
    "{{- '<|im_start|>user\\n<tool_response>' + m.content + '</tool_response><|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
"""A tool-calling ChatML template in the shape of Qwen2.5's and Hermes': calls written from their parsed
arguments, tool results as user turns, an assistant turn with ``tool_calls`` undefined on the plain path."""


@pytest.mark.parametrize(("source", "expected"), [("", VLLM_STRING), (PARTS_LOOP, VLLM_OPENAI)])
def test_messages_reach_the_template_as_vllm_prepares_them(source: str, expected: list[Any]) -> None:
    template = ChatTemplate(source + "{{ messages | tojson }}", {})
    assert json.loads(template.render(AGENT, add_generation_prompt=False)) == expected


def test_a_null_or_missing_content_renders_empty_in_the_tiny_models_template(tiny_tokenizer: Path) -> None:
    tok = load_tokenizer(str(tiny_tokenizer))
    text = ChatTemplate(CHAT_TEMPLATE, {}).render(AGENT)
    empty = f"{IM_START}assistant\n{IM_END}\n"
    assert text.count(empty) == 3  # this template writes no tool calls: vLLM's count has none either
    assert f"{IM_START}tool\nsunny\n20C{IM_END}\n" in text
    assert tok.chat_ids(AGENT) == tok.encode(text, special=False)


def test_tool_calls_and_results_render_as_a_tool_calling_template_writes_them() -> None:
    messages = [*AGENT[:3], {"role": "assistant", "content": "It is sunny.", "tool_calls": None}]
    text = ChatTemplate(TOOL_TEMPLATE, {}).render(messages)
    assert text == (
        "<|im_start|>user\nweather?<|im_end|>\n"
        '<|im_start|>assistant\n<tool_call>{"name": "get", "arguments": {"city": "Paris"}}</tool_call>'
        '<tool_call>{"name": "bad", "arguments": {}}</tool_call><|im_end|>\n'
        "<|im_start|>user\n<tool_response>sunny\n20C</tool_response><|im_end|>\n"
        "<|im_start|>assistant\nIt is sunny.<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


@pytest.mark.parametrize(
    "calls", [["not an object"], [{"type": "retrieval"}], [{"type": "function", "function": "get"}]]
)
def test_a_tool_call_vllm_refuses_is_a_tokenizer_error(calls: list[Any]) -> None:
    with pytest.raises(TokenizerError, match="tool_calls"):
        ChatTemplate(TOOL_TEMPLATE, {}).render([{"role": "assistant", "content": None, "tool_calls": calls}])


def test_the_estimate_counts_a_tool_calls_text() -> None:
    bare: list[dict[str, Any]] = [{"role": "user", "content": "weather?"}]
    bare.append({"role": "assistant", "content": None})
    calling = [bare[0], {**bare[1], "tool_calls": [CALL]}]
    est = EstimateTokenizer()
    assert len(est.chat_ids(calling)) > len(est.chat_ids(bare)) + len(est.encode("get"))


ROLES = "{% for m in messages %}[{{ m.role }}|{{ m.name }}|{{ m.tools }}]{{ m.content }}{% endfor %}"
DEV_TOOLS = [{"type": "function", "function": {"name": "g"}}]


@pytest.mark.parametrize(
    ("messages", "rendered"),
    [
        # Read off vLLM 0.32's /tokenize with ROLES as the request's template (--trust-request-chat-template):
        # alone and first, a developer message is a system one without its tools ...
        ([{"role": "developer", "content": "D", "name": "n", "tools": DEV_TOOLS}], "[system|n|]D"),
        # ... anywhere else, every system message (developers' included) becomes one first system message
        # of their non-empty contents, parts' text joined by newlines, the contents by blank lines.
        (
            [
                {"role": "system", "content": "S1"},
                {"role": "user", "content": "hi"},
                {"role": "developer", "content": "DEV", "name": "n"},
                {
                    "role": "developer",
                    "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
                },
                {"role": "system", "content": ""},
            ],
            "[system||]S1\n\nDEV\n\na\nb[user||]hi",
        ),
    ],
)
def test_developer_messages_are_system_ones_for_a_template_that_does_not_name_the_role(
    messages: list[dict[str, Any]], rendered: str
) -> None:
    """vLLM 0.32 ``safe_apply_chat_template`` (renderers/hf.py): ``_convert_developer_to_system`` and
    ``_consolidate_system_messages`` unless ``_detect_developer_role_support`` finds ``"developer"`` or
    ``'developer'`` in the template."""
    assert ChatTemplate(ROLES, {}).render(messages, add_generation_prompt=False) == rendered
    for quoted in ("{# 'developer' #}", '{# "developer" #}'):
        kept = ChatTemplate(quoted + ROLES, {}).render(messages, add_generation_prompt=False)
        assert "[developer|n|" in kept
    assert (
        ChatTemplate("{# developer #}" + ROLES, {}).render(messages, add_generation_prompt=False) == rendered
    )


def test_merged_system_content_is_a_string_even_for_a_template_reading_parts() -> None:
    source = "{% for m in messages %}[{{ m.role }}]{% if m.content is string %}{{ m.content }}" + (
        "{% else %}{% for p in m.content %}<{{ p.text }}>{% endfor %}{% endif %}{% endfor %}"
    )
    messages = [
        {"role": "system", "content": "S"},
        {"role": "developer", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "user", "content": "u"},
    ]
    # vLLM 0.32's rendering of the same request (/tokenize, the template as the request's own).
    assert (
        ChatTemplate(source, {}).render(messages, add_generation_prompt=False) == "[system]S\n\na\nb[user]<u>"
    )


def test_tools_reach_the_template_as_vllm_dumps_them() -> None:
    """vLLM 0.32 hands the template ``[tool.model_dump() for tool in request.tools]``: a function's name,
    description and parameters (null when not sent), strict and defer_loading when set, no other key
    (``FunctionDefinition._serialize``); seen on /tokenize with ``{{ tools | tojson }}``."""
    tools = [
        {"type": "function", "function": {"name": "f", "x": 1}},
        {"defer_loading": True, "function": {"strict": True, "description": "d", "name": "g"}},
        "not a tool",
    ]
    assert request_tools(tools) == [
        {"type": "function", "function": {"name": "f", "description": None, "parameters": None}},
        {
            "type": "function",
            "function": {
                "name": "g",
                "description": "d",
                "parameters": None,
                "strict": True,
                "defer_loading": True,
            },
            "defer_loading": True,
        },
        "not a tool",
    ]
    text = ChatTemplate("{{ tools | tojson }}", {}).render([], tools=request_tools(tools[:1]))
    assert (
        text == '[{"type": "function", "function": {"name": "f", "description": null, "parameters": null}}]'
    )
    assert request_tools(None) is None


def test_template_kwargs_are_handed_on_as_vllm_merges_them() -> None:
    """``merge_kwargs`` drops a None or "auto" value (the template sees it undefined; False and 0 stay)."""
    assert template_kwargs({"a": None, "b": "auto", "c": False, "d": 0, "e": "x"}) == {
        "c": False,
        "d": 0,
        "e": "x",
    }
    assert template_kwargs(None) == {}
    for wrong in ("ab", [1]):
        with pytest.raises(TokenizerError, match="chat_template_kwargs"):
            template_kwargs(wrong)
