"""SSE parsing: what counts as content, events split across reads, errors and completeness."""

from __future__ import annotations

from infctl.bench.sse import parse_json_response, parse_stream

ROLE = b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n'
EMPTY = b'data: {"choices":[{"index":0,"delta":{"content":""}}]}\n\n'


def chat(text: str, reason: str | None = None) -> bytes:
    r = "null" if reason is None else f'"{reason}"'
    return (
        f'data: {{"choices":[{{"index":0,"delta":{{"content":"{text}"}},"finish_reason":{r}}}]}}\n\n'.encode()
    )


USAGE = b'data: {"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3}}\n\n'
DONE = b"data: [DONE]\n\n"


def test_role_and_empty_chunks_are_not_content() -> None:
    out = parse_stream(
        [(0.1, ROLE), (0.2, EMPTY), (0.3, chat(" a")), (0.4, chat(" b", "stop") + USAGE + DONE)]
    )
    assert out.content_times == [0.3, 0.4]
    assert out.done and out.finish_reason == "stop" and out.complete
    assert out.usage == {"prompt_tokens": 7, "completion_tokens": 3}


def test_event_split_across_reads_takes_the_completing_read_time() -> None:
    ev = chat(" hello")
    out = parse_stream([(1.0, ev[:10]), (2.0, ev[10:30]), (3.0, ev[30:] + DONE)])
    assert out.content_times == [3.0]


def test_crlf_multiline_data_and_completions_text() -> None:
    ev = b'data: {"choices":[{"text":" x",\r\ndata: "finish_reason":null}]}\r\n\r\n'
    out = parse_stream([(0.5, ev), (0.6, b"data: [DONE]\r\n\r\n")])
    assert out.content_times == [0.5] and out.done


def test_reasoning_content_counts() -> None:
    ev = b'data: {"choices":[{"delta":{"reasoning_content":"think"}}]}\n\n'
    assert parse_stream([(0.2, ev)]).content_times == [0.2]


def test_in_stream_errors_vllm_sglang_and_event_type() -> None:
    vllm = b'data: {"error":{"message":"KV cache full","code":400}}\n\n'
    assert parse_stream([(0.1, vllm + DONE)]).error == "KV cache full"
    sglang = b'data: {"object":"error","message":"boom","code":500}\n\n'
    assert parse_stream([(0.1, sglang)]).error == "boom"
    typed = b'event: error\ndata: {"message":"bad"}\n\n'
    assert parse_stream([(0.1, typed)]).error == "bad"
    assert "malformed" in (parse_stream([(0.1, b"data: {not json\n\n")]).error or "")


def test_stream_without_done_or_finish_is_incomplete() -> None:
    out = parse_stream([(0.1, chat(" a")), (0.2, chat(" b"))])
    assert not out.complete and out.content_times == [0.1, 0.2]


def test_non_streamed_json_answer() -> None:
    body = (
        b'{"choices":[{"message":{"content":"hi there"},"finish_reason":"stop"}],'
        b'"usage":{"completion_tokens":2}}'
    )
    out = parse_json_response(0.7, body)
    assert out.content_times == [0.7] and out.complete and out.usage == {"completion_tokens": 2}
