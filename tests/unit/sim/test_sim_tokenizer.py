"""``infctl sim --tokenizer PATH``: prompt tokens counted, cached, limited and published as a real engine
with that tokenizer would, in English and in Chinese (where whitespace words say one token)."""

from __future__ import annotations

import asyncio
import json
import random
import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest
import zmq
import zmq.asyncio
from tokenizerkit import chinese, english, thinking_model, tiny_tokenizer

from infctl import tokens
from infctl.sim.types import BlockStored
from infctl.telemetry.kv_events import decode_message
from infctl.tokenization import HFTokenizer, load_tokenizer

__all__ = ["tiny_tokenizer"]  # the session fixture, imported for this module's tests

rng = random.Random(7)
ENGLISH = english(rng, 120)
CHINESE = chinese(rng, 400)
assert " " not in CHINESE  # one whitespace "word"


@pytest.fixture(scope="module")
def tok(tiny_tokenizer: Path) -> HFTokenizer:
    loaded = load_tokenizer(str(tiny_tokenizer))
    assert isinstance(loaded, HFTokenizer)
    return loaded


async def post(url: str, path: str, body: dict[str, Any]) -> httpx.Response:
    async with httpx.AsyncClient(timeout=60) as client:
        return await client.post(f"{url}{path}", json=body)


@pytest.mark.parametrize("text", [ENGLISH, CHINESE], ids=["english", "chinese"])
async def test_usage_counts_the_tokenizers_ids(
    start_sim: Any, tiny_tokenizer: Path, tok: Any, text: str
) -> None:
    sim = await start_sim(tokenizer=str(tiny_tokenizer))
    url = sim.urls[0]
    completion = await post(url, "/v1/completions", {"prompt": text, "max_tokens": 3})
    assert completion.status_code == 200, completion.text
    assert completion.json()["usage"]["prompt_tokens"] == len(tok.encode(text)) > 100
    messages = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": text}]
    chat = await post(url, "/v1/chat/completions", {"messages": messages, "max_tokens": 3})
    assert chat.status_code == 200, chat.text
    usage = chat.json()["usage"]
    assert usage["prompt_tokens"] == len(tok.chat_ids(messages)) > len(tok.encode(text))
    assert usage["completion_tokens"] == 3
    # The same conversation again: its full blocks are cached (all but the last token recomputed at most).
    again = (await post(url, "/v1/chat/completions", {"messages": messages, "max_tokens": 3})).json()["usage"]
    n = usage["prompt_tokens"]
    assert (n - 1) // 16 * 16 <= again["prompt_tokens_details"]["cached_tokens"] < n


async def test_tokenize_answers_as_vllm_does(start_sim: Any, tiny_tokenizer: Path, tok: Any) -> None:
    sim = await start_sim(tokenizer=str(tiny_tokenizer), max_model_len=4096)
    url = sim.urls[0]
    body = (await post(url, "/tokenize", {"model": sim.instances[0].model, "prompt": CHINESE})).json()
    assert body == {"count": len(body["tokens"]), "max_model_len": 4096, "tokens": tok.encode(CHINESE),
                    "token_strs": None}  # fmt: skip
    messages = [{"role": "user", "content": CHINESE}]
    chat = (await post(url, "/tokenize", {"messages": messages})).json()
    assert chat["tokens"] == tok.chat_ids(messages) and chat["count"] == len(chat["tokens"])
    bare = (await post(url, "/tokenize", {"messages": messages, "add_generation_prompt": False})).json()
    assert bare["tokens"] == tok.chat_ids(messages, add_generation_prompt=False) != chat["tokens"]
    # No content is an empty one (vLLM's parse_chat_messages); a tool call that is not a function is refused.
    empty = (await post(url, "/tokenize", {"messages": [{"role": "user"}]})).json()
    assert empty["tokens"] == tok.chat_ids([{"role": "user", "content": ""}])
    odd = [{"role": "assistant", "content": None, "tool_calls": [{"type": "custom", "id": "c1"}]}]
    refused = await post(url, "/tokenize", {"messages": odd})
    assert refused.status_code == 400 and refused.json()["error"]["type"] == "BadRequestError"


async def test_sglang_tokenize_takes_prompts(start_sim: Any, tiny_tokenizer: Path, tok: Any) -> None:
    sim = await start_sim(personality="sglang", tokenizer=str(tiny_tokenizer))
    url = sim.urls[0]
    one = (await post(url, "/v1/tokenize", {"prompt": CHINESE})).json()
    assert one["tokens"] == tok.encode(CHINESE) and one["count"] == len(one["tokens"])
    many = (await post(url, "/tokenize", {"prompt": [ENGLISH, CHINESE]})).json()
    assert many["tokens"] == [tok.encode(ENGLISH), tok.encode(CHINESE)]
    assert many["count"] == [len(t) for t in many["tokens"]]
    assert (await post(url, "/v1/tokenize", {"messages": []})).status_code == 400


async def test_the_context_limit_counts_real_tokens(start_sim: Any, tiny_tokenizer: Path, tok: Any) -> None:
    words = await start_sim(max_model_len=256)
    real = await start_sim(tokenizer=str(tiny_tokenizer), max_model_len=256)
    body = {"prompt": CHINESE, "max_tokens": 4}
    assert (await post(words.urls[0], "/v1/completions", body)).status_code == 200  # 1 "word"
    refused = await post(real.urls[0], "/v1/completions", body)
    assert refused.status_code == 400
    assert f"contains {len(tok.encode(CHINESE))} input tokens" in refused.json()["error"]["message"]


async def test_a_long_prompt_is_tokenized_off_the_loop_to_the_same_ids(
    start_sim: Any, tiny_tokenizer: Path, tok: Any
) -> None:
    sim = await start_sim(tokenizer=str(tiny_tokenizer), max_model_len=65536)
    long = (CHINESE * 40)[: tok.off_loop_chars + 500]
    reply = await post(sim.urls[0], "/v1/completions", {"prompt": long, "max_tokens": 1})
    assert reply.status_code == 200, reply.text
    assert reply.json()["usage"]["prompt_tokens"] == len(tok.encode(long))


async def test_the_default_stays_the_simulators_words(start_sim: Any) -> None:
    sim = await start_sim()
    assert sim.tokenizer.name == "words"
    reply = await post(sim.urls[0], "/v1/completions", {"prompt": f"{ENGLISH} {CHINESE}", "max_tokens": 1})
    assert reply.json()["usage"]["prompt_tokens"] == tokens.count_tokens(ENGLISH) + 1


async def test_kv_events_carry_the_tokenizers_ids(start_sim: Any, tiny_tokenizer: Path, tok: Any) -> None:
    sim = await start_sim(tokenizer=str(tiny_tokenizer), kv_events_port=0)
    inst = sim.instances[0]
    ctx = zmq.asyncio.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.connect(inst.kv_endpoint.replace("*", "127.0.0.1"))
    try:
        async with asyncio.timeout(60):
            # ZMQ's slow joiner: warm-ups (new English prompts) until one's events arrive.
            for salt in range(1000):
                await post(
                    inst.url, "/v1/completions", {"prompt": english(random.Random(salt), 80), "max_tokens": 1}
                )
                if await sub.poll(500):
                    break
            while await sub.poll(200):
                await sub.recv_multipart()
            messages = [{"role": "user", "content": CHINESE}]
            reply = await post(inst.url, "/v1/chat/completions", {"messages": messages, "max_tokens": 1})
            assert reply.status_code == 200
            ids = tok.chat_ids(messages)
            full = len(ids) // 16 * 16
            published: list[int] = []
            while len(published) < full:
                batch = decode_message(await sub.recv_multipart()).batch
                published += [t for e in batch.events if isinstance(e, BlockStored) for t in e.token_ids]
    finally:
        sub.close(linger=0)
        ctx.term()
    assert published[:full] == ids[:full]


async def test_token_ids_past_the_vocabulary_are_refused_as_vllm_refuses(
    start_sim: Any, tiny_tokenizer: Path, tmp_path: Path
) -> None:
    """vLLM 0.32 (renderers/base.py ``validate_token_ids``) refuses an id past the larger of the tokenizer's
    largest id and the model's ``vocab_size`` - 1: a 400, or in a stream a 200 whose only event is the error
    (recorded from the CPU build: 'Token id 4096 is out of vocabulary', param null)."""
    from tokenizers import Tokenizer as RawTokenizer

    model = tmp_path / "model"
    shutil.copytree(tiny_tokenizer, model)
    largest = max(RawTokenizer.from_file(str(model / "tokenizer.json")).get_vocab(True).values())
    (model / "config.json").write_text(json.dumps({"vocab_size": largest + 1 + 64}))  # padded embeddings
    url = (await start_sim(tokenizer=str(model))).urls[0]
    top = largest + 64
    assert (await post(url, "/v1/completions", {"prompt": [1, top], "max_tokens": 2})).status_code == 200
    error = {"message": f"Token id {top + 1} is out of vocabulary", "type": "BadRequestError", "param": None,
             "code": 400}  # fmt: skip
    for prompt in ([1, top + 1, 2], [[1, 2], [3, top + 1]]):
        refused = await post(url, "/v1/completions", {"prompt": prompt, "max_tokens": 2, "n": 2})
        assert (refused.status_code, refused.json()) == (400, {"error": error})
    stream = await post(url, "/v1/completions", {"prompt": [top + 1], "max_tokens": 2, "stream": True})
    events = stream.text.strip().split("\n\n")
    assert stream.status_code == 200 and [json.loads(events[0].removeprefix("data: "))] == [{"error": error}]
    assert events[1:] == ["data: [DONE]"]
    # The simulator's own words: no model, no vocabulary to hold ids to.
    words = (await start_sim()).urls[0]
    assert (
        await post(words, "/v1/completions", {"prompt": [1, 99_999_999], "max_tokens": 2})
    ).status_code == 200


OWN_TEMPLATE = "{% for m in messages %}{% for _ in range(3) %}{{ m['content'] }}{% endfor %}{% endfor %}"
UNTRUSTED = (
    "Chat template is passed with request, but --trust-request-chat-template is not set. "
    "Refused request with untrusted chat template."
)


@pytest.mark.parametrize(
    "extra",
    [
        {"chat_template": OWN_TEMPLATE},
        {"chat_template": ""},
        {"chat_template_kwargs": {"chat_template": "x"}},
    ],
)
async def test_a_requests_own_template_is_refused_unless_trusted_as_vllm_does(
    start_sim: Any, tiny_tokenizer: Path, extra: dict[str, Any]
) -> None:
    """vLLM 0.32 (``OnlineRenderer.validate_chat_template``): any template but null, on the chat route and
    ``/tokenize`` alike, is refused with a plain 400 before anything is rendered."""
    url = (await start_sim(tokenizer=str(tiny_tokenizer))).urls[0]
    body = {"messages": [{"role": "user", "content": ENGLISH}], "max_tokens": 2, **extra}
    for path in ("/v1/chat/completions", "/tokenize"):
        resp = await post(url, path, body)
        assert resp.status_code == 400, resp.text
        want = {"message": UNTRUSTED, "type": "BadRequestError", "param": None, "code": 400}
        assert resp.json() == {"error": want}
    plain = await post(
        url, "/v1/chat/completions", {**body, "chat_template": None, "chat_template_kwargs": {}}
    )
    assert plain.status_code == 200, plain.text


async def test_a_trusting_engine_renders_the_requests_template(
    start_sim: Any, tiny_tokenizer: Path, tok: HFTokenizer
) -> None:
    url = (await start_sim(tokenizer=str(tiny_tokenizer), trust_request_chat_template=True)).urls[0]
    messages = [{"role": "user", "content": CHINESE}]
    body = {"messages": messages, "max_tokens": 2, "chat_template": OWN_TEMPLATE}
    chat = await post(url, "/v1/chat/completions", body)
    assert chat.status_code == 200, chat.text
    want = tok.encode(CHINESE * 3, special=False)
    assert chat.json()["usage"]["prompt_tokens"] == len(want) != len(tok.chat_ids(messages))
    assert (await post(url, "/tokenize", body)).json()["tokens"] == want
    # SGLang 0.5.23's ChatCompletionRequest has no chat_template field (the model's template renders it).
    sglang = (await start_sim(personality="sglang", tokenizer=str(tiny_tokenizer))).urls[0]
    usage = (await post(sglang, "/v1/chat/completions", body)).json()["usage"]
    assert usage["prompt_tokens"] == len(tok.chat_ids(messages))


async def test_template_kwargs_are_served_as_vllm_serves_them(
    start_sim: Any, tiny_tokenizer: Path, tok: HFTokenizer
) -> None:
    """vLLM 0.32, trusted: ``chat_template_kwargs``' ``chat_template`` is the template and ``tokenize`` is
    served, no 400 (checked on its chat route and /tokenize); untrusted, the kwargs' template is refused
    (the test above). SGLang's sim keeps the model's template."""
    url = (await start_sim(tokenizer=str(tiny_tokenizer), trust_request_chat_template=True)).urls[0]
    messages = [{"role": "user", "content": CHINESE}]
    kwargs = {"chat_template": OWN_TEMPLATE, "tokenize": True}
    body = {"messages": messages, "max_tokens": 2, "chat_template_kwargs": kwargs}
    chat = await post(url, "/v1/chat/completions", body)
    assert chat.status_code == 200, chat.text
    want = tok.encode(CHINESE * 3, special=False)
    assert chat.json()["usage"]["prompt_tokens"] == len(want) != len(tok.chat_ids(messages))
    assert (await post(url, "/tokenize", body)).json()["tokens"] == want
    sglang = (await start_sim(personality="sglang", tokenizer=str(tiny_tokenizer))).urls[0]
    own = {**body, "chat_template_kwargs": {"chat_template": OWN_TEMPLATE}}
    usage = (await post(sglang, "/v1/chat/completions", own)).json()["usage"]
    assert usage["prompt_tokens"] == len(tok.chat_ids(messages))


async def test_reasoning_effort_reaches_the_template_on_vllms_chat_route_only(
    start_sim: Any, tmp_path: Path, tiny_tokenizer: Path
) -> None:
    """vLLM 0.32: the chat route hands ``reasoning_effort`` to the template and derives ``enable_thinking``
    from it (``ChatCompletionRequest.build_chat_params``); its ``/tokenize`` request has no such field.
    SGLang's sim renders as before."""
    model = thinking_model(tmp_path / "thinking", tiny_tokenizer)
    thinking = load_tokenizer(str(model))
    url = (await start_sim(tokenizer=str(model))).urls[0]
    messages = [{"role": "user", "content": ENGLISH}]
    body = {"messages": messages, "max_tokens": 2, "reasoning_effort": "none"}
    usage = (await post(url, "/v1/chat/completions", body)).json()["usage"]
    want = thinking.chat_ids(messages, reasoning_effort="none")
    assert usage["prompt_tokens"] == len(want) > len(thinking.chat_ids(messages))
    assert (await post(url, "/tokenize", body)).json()["tokens"] == thinking.chat_ids(messages)
    kwargs = {**body, "chat_template_kwargs": {"enable_thinking": True}}
    usage = (await post(url, "/v1/chat/completions", kwargs)).json()["usage"]
    on = thinking.chat_ids(messages, reasoning_effort="none", chat_template_kwargs={"enable_thinking": True})
    assert usage["prompt_tokens"] == len(on) < len(want)
    sglang = (await start_sim(personality="sglang", tokenizer=str(model))).urls[0]
    usage = (await post(sglang, "/v1/chat/completions", body)).json()["usage"]
    assert usage["prompt_tokens"] == len(thinking.chat_ids(messages))
