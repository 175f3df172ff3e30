"""The simulator's words as a tokenizer: a chat is its role markers and every word a template writes of its
messages, the tool calls' names and arguments as well as the content."""

from __future__ import annotations

import json
from typing import Any

from infctl import tokens
from infctl.tokenization import WordTokenizer

CALL = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}


def test_tool_calls_are_counted_as_content_is() -> None:
    tok = WordTokenizer()
    question = {"role": "user", "content": "weather in Paris?"}
    calls: list[dict[str, Any]] = [question, {"role": "assistant", "content": None, "tool_calls": [CALL]}]
    # <|user|> and 3 words; <|assistant|>, the call's name and its JSON (2 words); <|assistant|>
    assert len(tok.chat_ids(calls)) == (1 + 3) + (1 + 1 + 2) + 1
    said = [question, {"role": "assistant", "content": 'get_weather {"city": "Paris"}'}]
    assert tok.chat_ids(calls) == tok.chat_ids(said)  # the same words, the same ids
    both = [question, {"role": "assistant", "content": "let me see", "tool_calls": [CALL, CALL]}]
    assert len(tok.chat_ids(both)) == len(tok.chat_ids(calls)) + 3 + 3


def test_arguments_given_as_an_object_are_counted_as_their_json() -> None:
    call = {"type": "function", "function": {"name": "f", "arguments": {"a": [1, 2]}}}
    text = WordTokenizer.chat_text([{"role": "assistant", "tool_calls": [call]}], generation_prompt=False)
    assert text.split() == ["<|assistant|>", "f", *json.dumps({"a": [1, 2]}).split()]
    assert tokens.count_tokens(text) == 1 + 1 + 3
