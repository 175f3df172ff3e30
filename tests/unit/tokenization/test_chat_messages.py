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
from infctl.tokenization.chat import ChatTemplate

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
