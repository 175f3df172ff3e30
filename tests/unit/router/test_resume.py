"""The rules of continuing a broken stream (``infctl.router.resume``): what the client was sent, what can go
on, the continuation's request, and its events rewritten into the client's stream."""

from __future__ import annotations

import json
from typing import Any

import pytest

from infctl.router.resume import (
    DONE,
    Rewriter,
    Sent,
    closing_events,
    continuation_body,
    error_event,
    merged_usage,
    read_sent,
    uncontinuable,
)


def _event(obj: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _chunked(*parts: bytes) -> list[bytes]:
    return [b"%x\r\n%b\r\n" % (len(p), p) for p in parts]


def _completion(text: str, finish: str | None = None, **extra: Any) -> bytes:
    choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
    return _event({"id": "cmpl-1", "object": "text_completion", "created": 11, "model": "m",
                   "choices": [choice], **extra})  # fmt: skip


def _chat(delta: dict[str, Any], finish: str | None = None, rid: str = "chatcmpl-1") -> bytes:
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    return _event({"id": rid, "object": "chat.completion.chunk", "created": 11, "model": "m",
                   "choices": [choice]})  # fmt: skip


def test_the_sent_text_is_read_back_through_the_chunked_framing() -> None:
    kept = _chunked(_completion(" one"), _completion(" two") + _completion(" three"))
    sent = read_sent(kept, chunked=True, chat=False)
    assert (sent.text, sent.whole, sent.finished, sent.obstacle) == (" one two three", True, False, None)
    assert sent.head == {"id": "cmpl-1", "object": "text_completion", "created": 11, "model": "m"}


def test_half_a_chunk_or_half_an_event_is_not_whole() -> None:
    full = _chunked(_completion(" one"))[0]
    assert not read_sent([full[:-5]], chunked=True, chat=False).whole
    assert not read_sent([_completion(" one")[:-3]], chunked=False, chat=False).whole


def test_a_finished_stream_and_what_in_a_stream_blocks_its_continuation() -> None:
    done = read_sent([_completion(" a", "stop")], chunked=False, chat=False)
    assert done.finished and done.finish_reason == "stop"
    tool = read_sent(
        [_chat({"role": "assistant"}), _chat({"tool_calls": [{"index": 0}]})], chunked=False, chat=True
    )
    assert tool.obstacle is not None and "tool call" in tool.obstacle
    thinking = read_sent([_chat({"reasoning_content": "hmm"})], chunked=False, chat=True)
    assert thinking.obstacle is not None and "reasoning" in thinking.obstacle


@pytest.mark.parametrize(
    ("body", "chat", "why"),
    [
        ({"prompt": "x", "n": 2}, False, "several choices"),
        ({"prompt": "x", "best_of": 3}, False, "several choices"),
        ({"prompt": "x", "logprobs": 0}, False, "logprobs"),
        ({"messages": [{"role": "user", "content": "x"}], "logprobs": True}, True, "logprobs"),
        ({"prompt": "x", "echo": True}, False, "echo"),
        ({"prompt": [1, 2, 3]}, False, "token ids"),
        ({"prompt": ["a", "b"]}, False, "token ids or a batch"),
        (
            {"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]},
            True,
            "tool call",
        ),
        ({"messages": [], "response_format": {"type": "json_object"}}, True, "structured"),
        ({"prompt": "x", "guided_regex": "a+"}, False, "structured"),
    ],
)
def test_what_cannot_be_continued_says_why(body: dict[str, Any], chat: bool, why: str) -> None:
    reason = uncontinuable(body, chat=chat)
    assert reason is not None and why in reason


@pytest.mark.parametrize(
    ("body", "chat"),
    [
        ({"prompt": "x", "logprobs": None, "n": 1, "temperature": 0.7, "seed": 3}, False),
        ({"prompt": ["x"]}, False),
        ({"messages": [{"role": "user", "content": "x"}], "tools": [{}], "tool_choice": "none"}, True),
        ({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "text"}}, True),
    ],
)
def test_plain_sampled_requests_can_be_continued(body: dict[str, Any], chat: bool) -> None:
    assert uncontinuable(body, chat=chat) is None


def test_a_completion_goes_on_from_its_prompt_and_text_with_the_budget_left() -> None:
    body = {
        "prompt": "Once",
        "max_tokens": 20,
        "min_tokens": 4,
        "seed": 9,
        "temperature": 0.5,
        "stream": True,
    }
    out = continuation_body(body, chat=False, text=" upon a time", sent_tokens=3)
    assert out == {**body, "prompt": "Once upon a time", "max_tokens": 17, "min_tokens": 1}
    assert body["prompt"] == "Once"  # the original is left alone
    defaulted = continuation_body({"prompt": ["Once"]}, chat=False, text=" upon", sent_tokens=1)
    assert defaulted == {"prompt": ["Once upon"], "max_tokens": 15}  # the API's default of 16, less 1


def test_a_chat_goes_on_as_its_final_assistant_message() -> None:
    messages = [{"role": "user", "content": "hi"}]
    body = {"messages": messages, "max_completion_tokens": 10}
    out = continuation_body(body, chat=True, text="Hello th", sent_tokens=2)
    assert out["messages"] == [*messages, {"role": "assistant", "content": "Hello th"}]
    assert (out["continue_final_message"], out["add_generation_prompt"]) == (True, False)
    assert out["max_completion_tokens"] == 8 and "max_tokens" not in out
    assert len(body["messages"]) == 1
    unbounded = continuation_body({"messages": messages}, chat=True, text="x", sent_tokens=1)
    assert "max_tokens" not in unbounded  # the engine's own limit, as for the original
    prefilled = {
        "messages": [*messages, {"role": "assistant", "content": "Sure:"}],
        "continue_final_message": True,
    }
    again = continuation_body(prefilled, chat=True, text=" one", sent_tokens=1)
    assert again["messages"][-1] == {"role": "assistant", "content": "Sure: one"}


def test_a_continuation_reads_as_the_original_response() -> None:
    sent = read_sent(
        [_chat({"role": "assistant", "content": ""}), _chat({"content": "Hel"})], chunked=False, chat=True
    )
    rewriter = Rewriter(sent, chat=True)
    rewriter.sent_tokens = 1
    usage = {"prompt_tokens": 13, "completion_tokens": 4, "total_tokens": 17}
    upstream = (
        _chat({"role": "assistant", "content": ""}, rid="chatcmpl-2")
        + _chat({"content": "lo"}, rid="chatcmpl-2")
        + _chat({"content": "!"}, "stop", rid="chatcmpl-2")
        + _event({"id": "chatcmpl-2", "created": 99, "choices": [], "usage": usage})
        + DONE
    )
    out = rewriter.events(upstream).split(b"\n\n")
    assert out[-2:] == [b"data: [DONE]", b""]
    chunks = [json.loads(e.removeprefix(b"data: ")) for e in out[:-2]]
    assert [c["id"] for c in chunks] == ["chatcmpl-1"] * 3  # the role chunk dropped
    assert [c["created"] for c in chunks] == [11] * 3
    assert [c["choices"][0]["delta"] for c in chunks[:2]] == [{"content": "lo"}, {"content": "!"}]
    assert chunks[2]["usage"] == {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}
    assert (sent.text, sent.finish_reason, sent.done) == ("Hello!", "stop", True)


def test_usage_moves_the_tokens_already_sent_from_prompt_to_completion() -> None:
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15,
             "prompt_tokens_details": {"cached_tokens": 10}}  # fmt: skip
    merged = merged_usage(usage, 3)
    assert (merged["prompt_tokens"], merged["completion_tokens"], merged["total_tokens"]) == (7, 8, 15)
    assert merged["prompt_tokens_details"] == {"cached_tokens": 7}


def test_closing_events_end_a_stream_whose_generation_had_ended() -> None:
    sent = read_sent([_completion(" a"), _completion(" b")], chunked=False, chat=False)
    events = closing_events(sent, chat=False, include_usage=True, prompt_tokens=3, sent_tokens=2)
    parts = events.split(b"\n\n")
    final, usage = (json.loads(p.removeprefix(b"data: ")) for p in parts[:2])
    assert final["choices"][0]["finish_reason"] == "length" and final["id"] == "cmpl-1"
    assert usage["usage"] == {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    assert parts[2:] == [b"data: [DONE]", b""]
    finished = Sent(finish_reason="stop", usage=True)
    assert closing_events(finished, chat=True, include_usage=True, prompt_tokens=3, sent_tokens=2) == DONE


def test_the_error_event_has_the_shape_the_openai_sdk_raises_on() -> None:
    event, done = error_event("backend gone").split(b"\n\n")[:2]
    error = json.loads(event.removeprefix(b"data: "))["error"]
    assert error["message"] == "backend gone" and error["code"] == 502 and done == b"data: [DONE]"
