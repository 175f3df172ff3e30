"""A continuation whose engine opens its stream with a 5xx error event (200, then ``data: {"error": ...}``, a
chat's after its role chunk: vLLM 0.32's in-band generation error, ``infctl.router.opening``) has added
nothing to the client's stream: it is a failed try, so the next backend continues the stream, or, with none
left, the router ends it with its own error event. Never the engine's error in the middle of an answer.

The erring engine is a fake that answers every generation that way and counts the continuations it was sent
(a completion's prompt longer than the client's; a chat's ``continue_final_message``)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai
import pytest
from aiohttp import web

from infctl import tokens
from infctl.router.snapshot import Backend
from infctl.telemetry.prometheus import parse_metrics

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
PROMPT = "a b c"
SEED = 11
CUT_AFTER = 5
MAX_TOKENS = 24
ENGINE_ERROR = "the engine failed to generate (injected)"


def error_stream_events(*, chat: bool) -> list[bytes]:
    """What vLLM 0.32 streams for a generation that fails at once (``opening``'s docstring): a chat's role
    chunk, then the 500 error event and ``[DONE]``."""
    error = {"error": {"message": ENGINE_ERROR, "type": "InternalServerError", "param": None, "code": 500}}
    events = [b"data: " + json.dumps(error).encode() + b"\n\n", b"data: [DONE]\n\n"]
    if chat:
        role = {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": MODEL,
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}],
        }
        events.insert(0, b"data: " + json.dumps(role).encode() + b"\n\n")
    return events


class ErringEngine:
    """An engine whose every stream opens with a 500 error event; ``seen``: the bodies it was sent."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        self.url = ""

    @property
    def continuations(self) -> int:
        return sum(
            b.get("prompt", PROMPT) != PROMPT or bool(b.get("continue_final_message")) for b in self.seen
        )

    async def generate(self, request: web.Request) -> web.StreamResponse:
        self.seen.append(await request.json())
        out = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await out.prepare(request)
        for event in error_stream_events(chat=request.path.endswith("chat/completions")):
            await out.write(event)  # one write each: the router holds the role chunk across reads
        await out.write_eof()
        return out


@pytest.fixture
async def erring() -> AsyncIterator[ErringEngine]:
    engine = ErringEngine()

    async def ok(_: web.Request) -> web.Response:
        return web.json_response({})

    app = web.Application()
    app.router.add_post("/v1/completions", engine.generate)
    app.router.add_post("/v1/chat/completions", engine.generate)
    app.router.add_get("/{tail:.*}", ok)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    engine.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    yield engine
    await runner.cleanup()


async def cutting_engine(start_sim: Any) -> str:
    """A simulated engine that cuts every answer after ``CUT_AFTER`` tokens."""
    url = str((await start_sim()).urls[0])
    async with httpx.AsyncClient(timeout=20) as c:
        r = await c.post(f"{url}/admin/faults", json={"specs": [f"disconnect-after={CUT_AFTER}"]})
        r.raise_for_status()
    return url


async def stream_text(api: openai.AsyncOpenAI, *, chat: bool) -> str:
    """One streamed answer's text (raises the SDK's APIError on an error event)."""
    if chat:
        messages: Any = [{"role": "user", "content": PROMPT}]
        chunks = await api.chat.completions.create(
            model=MODEL, messages=messages, max_tokens=MAX_TOKENS, seed=SEED, stream=True
        )
        return "".join([c.choices[0].delta.content or "" async for c in chunks if c.choices])
    stream = await api.completions.create(
        model=MODEL, prompt=PROMPT, max_tokens=MAX_TOKENS, seed=SEED, stream=True
    )
    return "".join([c.choices[0].text async for c in stream if c.choices])


def continued_at(text: str) -> int:
    """k: ``text`` is one engine's first k words, then another's first MAX_TOKENS - k (or all of one)."""
    words = [tokens.output_word(SEED, i) for i in range(MAX_TOKENS)]
    for k in [MAX_TOKENS, *range(1, CUT_AFTER + 1)]:
        if text.split() == words[:k] + words[: MAX_TOKENS - k]:
            return k
    raise AssertionError(f"not one stream continued by another: {text!r}")


async def stream_metrics(url: str) -> dict[str, dict[str, float]]:
    async with httpx.AsyncClient(timeout=20) as c:
        parsed = parse_metrics((await c.get(f"{url}/metrics")).text)
    return {
        name: {next(iter(s.labels.values())): s.value for s in parsed.get(f"infctl_router_{name}", [])}
        for name in ("broken_streams_total", "stream_error_events_total")
    }


@pytest.mark.parametrize("chat", [False, True], ids=["completion", "chat"])
@pytest.mark.parametrize("client", ["lean", "aiohttp"])
async def test_a_continuation_opening_with_an_error_event_goes_on_on_the_next_engine(
    start_sim: Any, start_router: Any, erring: ErringEngine, client: str, chat: bool
) -> None:
    cutting, sound = await cutting_engine(start_sim), str((await start_sim()).urls[0])
    backends = [Backend(id="cutting", url=cutting), Backend(id="erring", url=erring.url)]
    url = await start_router(
        [*backends, Backend(id="sound", url=sound)], policy="round_robin", upstream_client=client
    )
    api = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0, timeout=60)
    cuts = 0
    async with asyncio.timeout(120):  # a guard against hanging, not a measurement
        while not erring.continuations:
            cuts += continued_at(await stream_text(api, chat=chat)) < MAX_TOKENS
    await api.close()
    assert (await stream_metrics(url)) == {
        "broken_streams_total": {"continued": cuts},
        "stream_error_events_total": {},
    }


@pytest.mark.parametrize("chat", [False, True], ids=["completion", "chat"])
@pytest.mark.parametrize("client", ["lean", "aiohttp"])
async def test_a_continuation_opening_with_an_error_event_and_no_engine_left_gets_the_routers_error(
    start_sim: Any, start_router: Any, erring: ErringEngine, client: str, chat: bool
) -> None:
    """Cut by one engine, its continuation failed by the other: the SDK raises the router's error (nowhere
    left to continue), not the engine's."""
    backends = [
        Backend(id="cutting", url=await cutting_engine(start_sim)),
        Backend(id="erring", url=erring.url),
    ]
    url = await start_router(backends, policy="round_robin", upstream_client=client)
    api = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0, timeout=60)
    raised: list[openai.APIError] = []
    async with asyncio.timeout(120):
        while not erring.continuations:
            with pytest.raises(openai.APIError) as caught:
                await stream_text(api, chat=chat)
            raised.append(caught.value)
    await api.close()
    for exc in raised:
        assert "no backend is left to continue it on" in exc.message, exc.message
        assert not isinstance(exc, openai.APIConnectionError)
    seen = await stream_metrics(url)
    assert seen == {
        "broken_streams_total": {"error_event": len(raised)},
        "stream_error_events_total": {"no_backend": len(raised)},
    }
