"""The engine's own ``/tokenize`` as a tokenizer: against a simulated vLLM on 127.0.0.1 with the tests' real
BPE tokenizer, its ids are the engine's for completion prompts and chats; each distinct request is sent
once; engines that are down or not vLLM are passed over, and when none answers the error says so."""

from __future__ import annotations

import asyncio
import json
import random
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from tokenizerkit import chinese, code, english, tiny_tokenizer

from infctl.tokenization import (
    EngineTokenizer,
    EngineUnavailable,
    TokenizerError,
    load_tokenizer,
)

__all__ = ["tiny_tokenizer"]

StartSim = Callable[..., Awaitable[Any]]
rng = random.Random(11)
TEXTS = [english(rng, 80), chinese(rng, 300), code(rng, 12), f"{english(rng, 5)} 混合 {chinese(rng, 20)}"]
CHATS: list[tuple[list[dict[str, Any]], dict[str, Any]]] = [
    ([{"role": "system", "content": chinese(rng, 200)}, {"role": "user", "content": "今天呢\uff1f"}], {}),
    ([{"role": "user", "content": english(rng, 30)}], {"add_generation_prompt": False}),
    (
        [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Sure, the"}],
        {"add_generation_prompt": False, "continue_final_message": True},
    ),
]


class Counting:
    """A real HTTP server in front of one engine: forwards everything, keeps each /tokenize body."""

    def __init__(self, upstream: str | None) -> None:
        self.upstream = upstream
        self.bodies: list[dict[str, Any]] = []
        self.model_gets = 0
        self.url = ""

    async def start(self) -> AsyncIterator[Counting]:
        app = web.Application()
        app.router.add_route("*", "/{path:.*}", self._forward)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]
        async with aiohttp.ClientSession() as self._session:
            yield self
        await runner.cleanup()

    async def _forward(self, request: web.Request) -> web.Response:
        raw = await request.read()
        if request.path == "/tokenize":
            self.bodies.append(json.loads(raw))
        if request.path == "/v1/models":
            self.model_gets += 1
        if self.upstream is None:  # not an engine: a server that knows no /tokenize
            return web.json_response({"detail": "Not Found"}, status=404)
        async with self._session.request(
            request.method,
            self.upstream + request.path,
            data=raw,
            headers={"content-type": "application/json"},
        ) as resp:
            return web.Response(body=await resp.read(), status=resp.status, content_type="application/json")


@pytest.fixture
async def sim(start_sim: StartSim, tiny_tokenizer: Path) -> Any:
    return await start_sim(tokenizer=str(tiny_tokenizer), model="tiny")


@pytest.fixture
async def counting(sim: Any) -> AsyncIterator[Counting]:
    async for server in Counting(sim.urls[0]).start():
        yield server


def dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


async def test_ids_are_the_engines_for_prompts_and_chats(sim: Any, tiny_tokenizer: Path) -> None:
    own = load_tokenizer(str(tiny_tokenizer))  # what the simulated engine tokenizes with
    tok = EngineTokenizer([sim.urls[0]])
    assert tok.exact and tok.off_loop_chars < 0
    for text in TEXTS:
        assert await asyncio.to_thread(tok.encode, text) == own.encode(text)
        assert await asyncio.to_thread(tok.count, text, special=False) == own.count(text, special=False)
    for messages, options in CHATS:
        ids = await asyncio.to_thread(lambda m=messages, o=options: tok.chat_ids(m, **o))
        assert ids == own.chat_ids(messages, **options)
    assert len(await asyncio.to_thread(tok.encode, TEXTS[1])) >= 300  # Chinese: about a token a character
    tok.close()


async def test_a_repeated_prompt_or_conversation_is_sent_once(counting: Counting) -> None:
    tok = EngineTokenizer([counting.url])
    first = await asyncio.to_thread(tok.encode, TEXTS[0])
    assert await asyncio.to_thread(tok.count, TEXTS[0]) == len(first)  # count and encode share an answer
    assert await asyncio.to_thread(tok.encode, TEXTS[0]) == first
    assert len(counting.bodies) == 1
    assert counting.bodies[0] == {"model": "tiny", "prompt": TEXTS[0], "add_special_tokens": True}
    # Another setting of add_special_tokens is another request.
    await asyncio.to_thread(tok.count, TEXTS[0], special=False)
    assert len(counting.bodies) == 2 and counting.bodies[1]["add_special_tokens"] is False
    messages, _ = CHATS[0]
    one = await asyncio.to_thread(tok.chat_ids, messages)
    # The same conversation rebuilt (other dicts, other key order) is the same request.
    rebuilt = [{"content": m["content"], "role": m["role"]} for m in messages]
    assert await asyncio.to_thread(tok.chat_ids, rebuilt) == one
    assert len(counting.bodies) == 3 and counting.bodies[2] == {"model": "tiny", "messages": messages}
    # Other template options render another prompt: asked for.
    other = await asyncio.to_thread(lambda: tok.chat_ids(messages, add_generation_prompt=False))
    assert len(other) < len(one) and counting.bodies[3]["add_generation_prompt"] is False
    assert len(counting.bodies) == 4 == tok.posts
    assert counting.model_gets == 1  # the model name is looked up once


async def test_the_model_named_is_sent_and_an_unknown_one_is_an_engine_that_cannot_answer(
    counting: Counting,
) -> None:
    assert await asyncio.to_thread(EngineTokenizer([counting.url], model="tiny").count, "a b") > 0
    assert counting.bodies[-1]["model"] == "tiny" and counting.model_gets == 0
    with pytest.raises(EngineUnavailable, match="does not exist"):
        await asyncio.to_thread(EngineTokenizer([counting.url], model="other").count, "a b")


async def test_engines_down_or_not_vllm_are_passed_over(counting: Counting) -> None:
    async for not_engine in Counting(None).start():
        tok = EngineTokenizer([dead_url(), not_engine.url, counting.url])
        assert await asyncio.to_thread(tok.count, TEXTS[1]) > 300
        # The engine that answered is asked first from then on.
        await asyncio.to_thread(tok.count, TEXTS[2])
        assert len(not_engine.bodies) + not_engine.model_gets == 1
        assert len(counting.bodies) == 2


async def test_no_engine_answering_is_a_tokenizer_error_naming_each(counting: Counting) -> None:
    down = [dead_url(), dead_url()]
    tok = EngineTokenizer(down, model="tiny")
    with pytest.raises(EngineUnavailable) as caught:
        await asyncio.to_thread(tok.count, "hello")
    assert isinstance(caught.value, TokenizerError) and caught.value.status == 503
    assert all(u in caught.value.message for u in down) and "ConnectError" in caught.value.message
    with pytest.raises(EngineUnavailable, match="no backend"):
        EngineTokenizer(list, model="tiny").count("hello")
    # Up again: answered (failures are not remembered).
    urls = [dead_url()]
    tok = EngineTokenizer(lambda: urls)
    with pytest.raises(EngineUnavailable):
        await asyncio.to_thread(tok.count, "hello")
    urls.append(counting.url)
    assert await asyncio.to_thread(tok.count, "hello") > 0


async def test_a_prompt_the_engine_refuses_is_a_tokenizer_error_not_retried(
    sim: Any, counting: Counting
) -> None:
    tok = EngineTokenizer([counting.url, sim.urls[0]])
    with pytest.raises(TokenizerError, match="refused") as caught:
        # vLLM refuses a tool call that is not a function call (renderers/chat_utils.py, 0.32)
        refused = [{"role": "assistant", "content": None, "tool_calls": [{"type": "retrieval"}]}]
        await asyncio.to_thread(lambda: tok.chat_ids(refused))
    assert not isinstance(caught.value, EngineUnavailable)
    assert len(counting.bodies) == 1  # the other engine would say the same


def test_settings_name_urls_and_a_model() -> None:
    tok = load_tokenizer("engine:http://a:8000/,http://b:8000,model=Qwen/Qwen3-8B")
    assert isinstance(tok, EngineTokenizer) and tok.exact
    assert tok.name == "engine:http://a:8000,http://b:8000" and tok.model == "Qwen/Qwen3-8B"
    resolved = load_tokenizer("engine", engines=lambda: ["http://c:8000"])
    assert isinstance(resolved, EngineTokenizer) and resolved.model is None
    for bad in ("engine", "engine:model=x", "engine:a:8000", "engine:http://a:1,model=x,model=y"):
        with pytest.raises(TokenizerError):
            load_tokenizer(bad)


async def test_reasoning_effort_goes_as_the_kwargs_vllms_chat_route_derives(counting: Counting) -> None:
    """vLLM 0.32's ``/tokenize`` has no ``reasoning_effort`` (its chat route's ``build_chat_params`` turns it
    into template kwargs): it is sent as those kwargs, the request's own kwargs kept."""
    tok = EngineTokenizer([counting.url])
    messages = [{"role": "user", "content": "hi"}]
    for options, kwargs in (
        ({"reasoning_effort": "none"}, {"reasoning_effort": "none", "enable_thinking": False}),
        (
            {"reasoning_effort": "low", "chat_template_kwargs": {"enable_thinking": False, "x": None}},
            {"enable_thinking": False, "reasoning_effort": "low"},
        ),
    ):
        await asyncio.to_thread(lambda o=options: tok.chat_ids(messages, **o))
        sent = counting.bodies[-1]
        assert "reasoning_effort" not in sent and sent["chat_template_kwargs"] == kwargs
    tok.close()
