"""What the simulated vLLM accepts and refuses, as vLLM 0.32 does (the answers below were recorded from the
CPU build with ``--max-model-len 4096``; ``tests/e2e/test_vllm_refusals.py`` compares the two live)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

CHAT = "/v1/chat/completions"
CMPL = "/v1/completions"
HI = [{"role": "user", "content": "hi"}]
LIMIT = 64
STREAMED = {"stream": True, "stream_options": {"include_usage": True}}


@pytest.fixture
async def url(start_sim: Any) -> str:
    cluster = await start_sim(max_model_len=LIMIT)
    return str(cluster.urls[0])


async def send(url: str, path: str, body: Any = None, **kw: Any) -> httpx.Response:
    async with httpx.AsyncClient(timeout=30) as client:
        if body is not None:
            return await client.post(url + path, json=body, **kw)
        return await client.post(url + path, **kw)


def ids(n: int) -> list[int]:
    return [7] * n


def sse_data(resp: httpx.Response) -> list[str]:
    """The ``data:`` payloads of a streamed answer."""
    return [e.removeprefix("data: ") for e in resp.text.strip().split("\n\n")]


# (path, body, status, error type, param): vLLM 0.32's answers.
REFUSED = [
    # The request model (pydantic): type "Bad Request", param the error's place.
    (CMPL, {"prompt": "a", "max_tokens": 3.5}, 400, "Bad Request", "body.max_tokens"),
    (CMPL, {"prompt": "a", "max_tokens": "abc"}, 400, "Bad Request", "body.max_tokens"),
    (CMPL, {"prompt": "a", "seed": "x"}, 400, "Bad Request", "body.seed"),
    (CMPL, {"prompt": "a", "model": 5}, 400, "Bad Request", "body.model"),
    (CMPL, {"prompt": 5}, 400, "Bad Request", "body.prompt"),
    (CMPL, {"prompt": [1, -2]}, 400, "Bad Request", "body.prompt.1"),
    (CHAT, {"max_tokens": 3}, 400, "Bad Request", "body.messages"),
    (CHAT, {"messages": "hi"}, 400, "Bad Request", "body.messages"),
    (CMPL, [1, 2], 400, "Bad Request", "body"),
    # Its model validators and the engine's checks: type BadRequestError, param the parameter.
    (CMPL, {"prompt": "a", "stream_options": {"include_usage": True}},
     400, "BadRequestError", "stream_options"),
    (CHAT, {"messages": HI, "stream": False, "stream_options": {"include_usage": False}},
     400, "BadRequestError", "stream_options"),
    (CHAT, {"messages": HI, "top_logprobs": 2}, 400, "BadRequestError", "top_logprobs"),
    (CMPL, {"prompt": "a", "logprobs": 21}, 400, "BadRequestError", "logprobs"),
    (CHAT, {"messages": HI, "logprobs": True, "top_logprobs": 21}, 400, "BadRequestError", "logprobs"),
    (CMPL, {"prompt": "a", "temperature": -1}, 400, "BadRequestError", "temperature"),
    (CMPL, {"prompt": "a", "top_p": 0}, 400, "BadRequestError", "top_p"),
    (CMPL, {"prompt": "a", "n": 0}, 400, "BadRequestError", None),
    (CMPL, {"max_tokens": 3}, 400, "BadRequestError", "prompt"),
    (CMPL, {"prompt": ""}, 400, "BadRequestError", "prompt"),
    (CMPL, {"prompt": None}, 400, "BadRequestError", "prompt"),
    (CMPL, {"prompt": []}, 400, "BadRequestError", None),
    (CHAT, {"messages": []}, 400, "BadRequestError", None),
    (CMPL, {"prompt": "a", "max_tokens": 0}, 400, "BadRequestError", "max_tokens"),
    (CMPL, {"prompt": "a", "max_tokens": -1}, 400, "BadRequestError", "max_tokens"),
    (CHAT, {"messages": HI, "max_completion_tokens": 0}, 400, "BadRequestError", "max_tokens"),
    (CMPL, {"prompt": "a", "max_tokens": LIMIT + 1}, 400, "BadRequestError", "max_tokens"),
    (CHAT, {"messages": HI, "max_tokens": LIMIT + 1}, 400, "BadRequestError", "max_tokens"),
    (CMPL, {"prompt": ids(LIMIT + 1), "max_tokens": 1}, 400, "BadRequestError", "input_tokens"),
    (CMPL, {"prompt": ids(LIMIT)}, 400, "BadRequestError", "max_tokens"),  # nothing left to generate
    (CHAT, {"messages": [{"role": "user", "content": "x " * LIMIT}]}, 400, "BadRequestError", "input_tokens"),
    # The model name comes after the request model, before everything else.
    (CMPL, {"prompt": "a", "model": "nope", "max_tokens": 0}, 404, "NotFoundError", "model"),
    (CHAT, {"model": "nope", "max_tokens": 1}, 400, "Bad Request", "body.messages"),
]  # fmt: skip


@pytest.mark.parametrize(("path", "body", "status", "kind", "param"), REFUSED)
async def test_refused_as_vllm_refuses(
    url: str, path: str, body: Any, status: int, kind: str, param: str | None
) -> None:
    resp = await send(url, path, body)
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"] == "application/json"
    error = resp.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert (error["type"], error["param"], error["code"]) == (kind, param, status)


async def test_messages_name_what_vllm_names(url: str) -> None:
    over = (await send(url, CMPL, {"prompt": "a", "max_tokens": LIMIT + 1})).json()["error"]["message"]
    assert over == (
        f"max_tokens={LIMIT + 1} cannot be greater than max_model_len={LIMIT}. Please request fewer output "
        f"tokens. (parameter=max_tokens, value={LIMIT + 1})"
    )
    long = (await send(url, CMPL, {"prompt": ids(LIMIT + 1)})).json()["error"]["message"]
    assert long.startswith(f"This model's maximum context length is {LIMIT} tokens. However, your prompt ")
    assert long.endswith(f"(parameter=input_tokens, value={LIMIT + 1})")
    model = (await send(url, CMPL, {"prompt": "a", "model": "nope"})).json()["error"]["message"]
    assert model.startswith("The model `nope` does not exist. Valid aliases: ")


async def test_max_tokens_is_clamped_to_what_the_context_has_left(url: str) -> None:
    """vLLM 0.32 generates up to the end of the context rather than refusing prompt + max_tokens > limit."""
    for body in (
        {"prompt": ids(LIMIT - 10), "max_tokens": 50},
        {"prompt": ids(LIMIT - 10), "max_tokens": LIMIT},
        {"prompt": ids(LIMIT - 10)},  # the default 16
    ):
        resp = await send(url, CMPL, body)
        assert resp.status_code == 200, resp.text
        usage = resp.json()["usage"]
        assert usage["completion_tokens"] == 10 and usage["total_tokens"] == LIMIT
        assert "cached_tokens" in usage["prompt_tokens_details"]
        assert resp.json()["choices"][0]["finish_reason"] == "length"


@pytest.mark.parametrize(
    "body",
    [
        {"prompt": "a", "max_tokens": "3"},
        {"prompt": "a", "max_tokens": 3.0},
        {"prompt": "a", "max_tokens": True},
        {"prompt": "a", "max_tokens": 2, "n": "1"},
        {"prompt": "a", "max_tokens": 2, "model": ""},
        {"prompt": "a", "max_tokens": 2, "stream_options": None},
        {"prompt": "a", "max_tokens": 2, "logprobs": 20},
        {"prompt": ["a"], "max_tokens": 2},
    ],
)
async def test_accepted_as_vllm_accepts(url: str, body: dict[str, Any]) -> None:
    resp = await send(url, CMPL, body)
    assert resp.status_code == 200, resp.text
    assert resp.json()["model"] != ""


async def test_a_message_without_content_is_an_empty_one(start_sim: Any) -> None:
    cluster = await start_sim()
    url = cluster.urls[0]
    bare = await send(url, CHAT, {"messages": [{"role": "user"}], "max_tokens": 1})
    empty = await send(url, CHAT, {"messages": [{"role": "user", "content": ""}], "max_tokens": 1})
    assert bare.status_code == empty.status_code == 200
    assert bare.json()["usage"]["prompt_tokens"] == empty.json()["usage"]["prompt_tokens"]
    none = await send(url, CHAT, {"messages": [{"role": "user", "content": None}], "max_tokens": 1})
    assert none.status_code == 400 and none.json()["error"]["type"] == "Bad Request"


@pytest.mark.parametrize(
    ("raw", "headers", "param"),
    [
        (b"{not json", {"content-type": "application/json"}, "body.1"),
        (b"", {"content-type": "application/json"}, "body"),
        (json.dumps({"prompt": "a"}).encode(), {"content-type": "text/plain"}, None),
        (json.dumps({"prompt": "a"}).encode(), {}, None),
    ],
)
async def test_bodies_vllm_cannot_read(
    url: str, raw: bytes, headers: dict[str, str], param: str | None
) -> None:
    for path in (CMPL, CHAT):
        resp = await send(url, path, content=raw, headers=headers)
        assert resp.status_code == 400
        assert resp.json()["error"]["type"] == "Bad Request" and resp.json()["error"]["param"] == param


async def test_json_with_a_charset_is_json(url: str) -> None:
    raw = json.dumps({"prompt": "a", "max_tokens": 1}).encode()
    resp = await send(url, CMPL, content=raw, headers={"content-type": "Application/JSON; charset=utf-8"})
    assert resp.status_code == 200


async def test_stream_with_usage_and_the_refusals_before_it(url: str) -> None:
    body = {"prompt": "a", "max_tokens": 2, **STREAMED}
    async with httpx.AsyncClient(timeout=30) as client:
        resp = await client.post(url + CMPL, json=body)
        too_long = await client.post(url + CMPL, json={**body, "prompt": ids(LIMIT + 1)})
    assert resp.headers["content-type"].startswith("text/event-stream")
    events = sse_data(resp)
    assert events[-1] == "[DONE]"
    usage = json.loads(events[-2])
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 2
    assert "cached_tokens" in usage["usage"]["prompt_tokens_details"]
    # Refused before the stream starts: a plain JSON 400, not an event.
    assert too_long.status_code == 400 and too_long.json()["error"]["param"] == "input_tokens"


async def test_method_and_route_errors_and_content_types(url: str) -> None:
    async with httpx.AsyncClient(timeout=30) as client:
        get = await client.get(url + CMPL)
        models = await client.get(url + "/v1/models")
        metrics = await client.get(url + "/metrics")
        health = await client.get(url + "/health")
    assert get.status_code == 405 and get.json() == {"detail": "Method Not Allowed"}
    assert models.headers["content-type"] == "application/json"
    assert models.json()["data"][0]["max_model_len"] == LIMIT
    assert metrics.headers["content-type"] == "text/plain; version=1.0.0; charset=utf-8"
    assert health.status_code == 200 and health.content == b""


async def test_n_and_batches_are_one_answer_with_a_choice_per_sequence(url: str) -> None:
    """vLLM 0.32: choice ``prompt * n + sample``; usage counts each prompt once and every generated token."""
    two = (await send(url, CMPL, {"prompt": ids(3), "max_tokens": 2, "n": 2})).json()
    assert [(c["index"], c["finish_reason"]) for c in two["choices"]] == [(0, "length"), (1, "length")]
    assert two["choices"][0]["text"] != two["choices"][1]["text"]  # each sequence samples its own
    assert (two["usage"]["prompt_tokens"], two["usage"]["completion_tokens"]) == (3, 4)
    batch = (await send(url, CMPL, {"prompt": [ids(2), ids(3)], "max_tokens": 2, "n": 2})).json()
    assert [c["index"] for c in batch["choices"]] == [0, 1, 2, 3]
    assert (batch["usage"]["prompt_tokens"], batch["usage"]["completion_tokens"]) == (5, 8)
    chat = (await send(url, CHAT, {"messages": HI, "max_tokens": 2, "n": 3})).json()
    assert [c["message"]["role"] for c in chat["choices"]] == ["assistant"] * 3
    assert chat["usage"]["completion_tokens"] == 6
    # Each prompt is clamped to what the context leaves it, as a single one is.
    clamped = (await send(url, CMPL, {"prompt": [ids(LIMIT - 1), ids(2)], "max_tokens": 3})).json()
    assert [c["finish_reason"] for c in clamped["choices"]] == ["length", "length"]
    assert clamped["usage"]["completion_tokens"] == 1 + 3


async def test_several_sequences_count_and_cache_as_vllm_counts_them(start_sim: Any, scrape: Any) -> None:
    """Recorded from vLLM 0.32 (CPU, block 128): an ``n: 3`` request on a 300-token prompt adds 900 prompt
    tokens, 900 prefix-cache queries, 512 hits (the 2nd and 3rd sequences hit the blocks the 1st schedules)
    and 3 finished requests; usage counts the prompt once and reports the last sequence's 256 cached tokens,
    a stream the first sequence's 0. Here with 16-token blocks: a 40-token prompt, 32 cached per sibling."""
    url = (await start_sim(block_size=16, model="m")).urls[0]
    labels = 'model_name="m",engine="0"'

    async def counters() -> list[float]:
        s = await scrape(url)
        names = ("prompt_tokens_total", "prefix_cache_queries_total", "prefix_cache_hits_total")
        done = s[f'vllm:request_success_total{{{labels},finished_reason="length"}}']
        return [s[f"vllm:{name}{{{labels}}}"] for name in names] + [done]

    prompt = [100 + i for i in range(40)]
    before = await counters()
    usage = (await send(url, CMPL, {"prompt": prompt, "max_tokens": 2, "n": 3})).json()["usage"]
    after = await counters()
    assert [a - b for a, b in zip(after, before, strict=True)] == [120, 120, 64, 3]
    assert (usage["prompt_tokens"], usage["prompt_tokens_details"]["cached_tokens"]) == (40, 32)
    fresh = [200 + i for i in range(40)]
    events = sse_data(await send(url, CMPL, {"prompt": fresh, "max_tokens": 2, "n": 3, **STREAMED}))
    streamed = json.loads(events[-2])["usage"]
    assert (streamed["prompt_tokens"], streamed["prompt_tokens_details"]["cached_tokens"]) == (40, 0)


async def test_a_stream_of_several_sequences_interleaves_them(url: str) -> None:
    resp = await send(url, CHAT, {"messages": HI, "max_tokens": 3, "n": 2, **STREAMED})
    events = sse_data(resp)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    roles = [c["choices"][0]["index"] for c in chunks if c["choices"] and "role" in c["choices"][0]["delta"]]
    assert roles == [0, 1]
    ends = sorted(
        c["choices"][0]["index"] for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]
    )
    assert ends == [0, 1]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 6
    text = {i: "".join(c["choices"][0]["delta"].get("content", "") for c in chunks
                       if c["choices"] and c["choices"][0]["index"] == i) for i in (0, 1)}  # fmt: skip
    assert all(len(t.split()) == 3 for t in text.values())


async def test_sglang_still_refuses_several_sequences(start_sim: Any) -> None:
    url = (await start_sim(personality="sglang")).urls[0]
    resp = await send(url, CMPL, {"prompt": "a", "max_tokens": 2, "n": 2})
    assert resp.status_code == 400 and "n=1" in resp.text
