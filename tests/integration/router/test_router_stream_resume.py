"""Streams whose engine dies mid-way, read by the real ``openai`` SDK (async): continued on the other engine
with nothing missing or repeated, or ended with an in-band error the SDK raises, never cut short silently.

The simulated engine's words are a function of the request's seed and the word's position in its answer
(``infctl.tokens.output_word``), so a stream cut after k words and continued elsewhere (with a k-word
shorter budget) reads exactly ``words(0..k-1) + words(0..max_tokens-k-1)``."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import httpx
import openai
import pytest

from infctl import tokens
from infctl.router.snapshot import Backend
from infctl.telemetry.prometheus import parse_metrics

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
SEED = 7
CUT_AFTER = 5
MAX_TOKENS = 24


def _words(n: int) -> list[str]:
    return [tokens.output_word(SEED, i) for i in range(n)]


def _assert_continuous(text: str, cut_after: int) -> int:
    """The words of ``text`` are the engine's first k, then another engine's first MAX_TOKENS - k, for some
    k in 1..cut_after (k = MAX_TOKENS when nothing broke). Returns k."""
    words = text.split()
    assert len(words) == MAX_TOKENS, text
    if words == _words(MAX_TOKENS):
        return MAX_TOKENS
    for k in range(1, cut_after + 1):
        if words == _words(k) + _words(MAX_TOKENS - k):
            return k
    raise AssertionError(f"not one stream continued by another: {text!r}")


async def _metrics(url: str) -> dict[str, dict[str, float]]:
    async with httpx.AsyncClient(timeout=20) as c:
        parsed = parse_metrics((await c.get(f"{url}/metrics")).text)
    out: dict[str, dict[str, float]] = {}
    for name in ("broken_streams_total", "stream_error_events_total"):
        for s in parsed.get(f"infctl_router_{name}", []):
            out.setdefault(name, {})[next(iter(s.labels.values()))] = s.value
    for s in parsed.get("infctl_router_stream_migrations_total", []):
        out["migrations"] = {"": s.value}
    return out


async def _two_engines(start_sim: Any, start_router: Any, client: str) -> tuple[str, list[str]]:
    """A router over two simulated engines, the first cutting every answer after ``CUT_AFTER`` tokens."""
    sims = [await start_sim(), await start_sim()]
    urls = [s.urls[0] for s in sims]
    async with httpx.AsyncClient(timeout=20) as c:
        r = await c.post(f"{urls[0]}/admin/faults", json={"specs": [f"disconnect-after={CUT_AFTER}"]})
        r.raise_for_status()
    backends = [Backend(id="faulty", url=urls[0]), Backend(id="sound", url=urls[1])]
    return await start_router(backends, policy="round_robin", upstream_client=client), urls


@pytest.mark.parametrize("client", ["lean", "aiohttp"])
async def test_a_completion_cut_mid_stream_goes_on_on_the_other_engine(
    start_sim: Any, start_router: Any, client: str
) -> None:
    url, _ = await _two_engines(start_sim, start_router, client)
    api = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0, timeout=60)
    cuts: list[int] = []
    async with asyncio.timeout(120):  # a guard against hanging, not a measurement
        while len(cuts) < 2:
            stream = await api.completions.create(
                model=MODEL,
                prompt="a b c",
                max_tokens=MAX_TOKENS,
                seed=SEED,
                stream=True,
                stream_options={"include_usage": True},
            )
            text, ids, usages = "", set(), []
            async for chunk in stream:
                ids.add(chunk.id)
                text += "".join(c.text for c in chunk.choices)
                if chunk.usage is not None:
                    usages.append(chunk.usage)
            k = _assert_continuous(text, CUT_AFTER)
            assert len(ids) == 1  # one response, whichever engines wrote it
            assert len(usages) == 1
            assert (usages[0].prompt_tokens, usages[0].completion_tokens) == (3, MAX_TOKENS)
            if k < MAX_TOKENS:
                cuts.append(k)
    await api.close()
    seen = await _metrics(url)
    assert seen["broken_streams_total"] == {"continued": len(cuts)}
    assert seen["migrations"][""] == len(cuts)
    assert "stream_error_events_total" not in seen


@pytest.mark.parametrize("client", ["lean", "aiohttp"])
async def test_a_chat_cut_mid_stream_goes_on_without_a_second_role_chunk(
    start_sim: Any, start_router: Any, client: str
) -> None:
    url, _ = await _two_engines(start_sim, start_router, client)
    api = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0, timeout=60)
    messages: Any = [{"role": "user", "content": "tell me a story"}]
    prompt_tokens = len(tokens.chat_prompt_text(messages).split())
    continued = 0
    async with asyncio.timeout(120):
        while not continued:
            stream = await api.chat.completions.create(
                model=MODEL,
                messages=messages,
                max_tokens=MAX_TOKENS,
                seed=SEED,
                stream=True,
                stream_options={"include_usage": True},
            )
            text, roles, ids, usages, finishes = "", 0, set(), [], []
            async for chunk in stream:
                ids.add(chunk.id)
                for choice in chunk.choices:
                    roles += choice.delta.role is not None
                    text += choice.delta.content or ""
                    if choice.finish_reason is not None:
                        finishes.append(choice.finish_reason)
                if chunk.usage is not None:
                    usages.append(chunk.usage)
            k = _assert_continuous(text, CUT_AFTER)
            continued += k < MAX_TOKENS
            assert (roles, len(ids), finishes) == (1, 1, ["length"])
            assert len(usages) == 1
            assert (usages[0].prompt_tokens, usages[0].completion_tokens) == (prompt_tokens, MAX_TOKENS)
    await api.close()
    assert (await _metrics(url))["broken_streams_total"] == {"continued": continued}


@pytest.mark.parametrize("client", ["lean", "aiohttp"])
async def test_a_stream_that_cannot_be_continued_raises_an_api_error(
    start_sim: Any, start_router: Any, client: str
) -> None:
    """logprobs cannot be continued: once the faulty engine breaks such a stream, the client's SDK raises
    APIError from the router's error event (requests the sound engine served finish as usual)."""
    url, _ = await _two_engines(start_sim, start_router, client)
    api = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0, timeout=60)
    raised: list[openai.APIError] = []
    async with asyncio.timeout(120):
        while not raised:
            stream = await api.completions.create(
                model=MODEL, prompt="a b c", max_tokens=MAX_TOKENS, logprobs=1, stream=True
            )
            try:
                async for _ in stream:
                    pass
            except openai.APIError as exc:
                raised.append(exc)
    await api.close()
    assert "logprobs" in raised[0].message and not isinstance(raised[0], openai.APIConnectionError)
    seen = await _metrics(url)
    assert seen["broken_streams_total"] == {"error_event": 1}
    assert seen["stream_error_events_total"] == {"uncontinuable": 1}


@pytest.mark.parametrize("client", ["lean", "aiohttp"])
async def test_a_stream_with_no_engine_left_ends_with_an_error_event(
    start_sim: Any, start_router: Any, client: str
) -> None:
    """One engine, which cuts the stream: nowhere to continue, so the client reads an error event and
    ``[DONE]`` on a cleanly ended response (no protocol error), and the SDK raises APIError."""
    sim = await start_sim()
    async with httpx.AsyncClient(timeout=20) as c:
        await c.post(f"{sim.urls[0]}/admin/faults", json={"specs": ["disconnect-after=5"]})
        url = await start_router([Backend(id="e", url=sim.urls[0])], upstream_client=client)
        body = {"model": MODEL, "prompt": "a b c", "max_tokens": 50, "stream": True}
        async with c.stream("POST", f"{url}/v1/completions", json=body) as r:
            lines = [line async for line in r.aiter_lines() if line]
        api = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0, timeout=60)
        with pytest.raises(openai.APIError, match="no backend is left"):
            async for _ in await api.completions.create(
                model=MODEL, prompt="a b c", max_tokens=50, stream=True
            ):
                pass
        await api.close()
    assert lines[-1] == "data: [DONE]" and lines[-2].startswith('data: {"error":')
    assert all(line.startswith("data: {") for line in lines[:-2])
    seen = await _metrics(url)
    assert seen["broken_streams_total"] == {"error_event": 2}
    assert seen["stream_error_events_total"] == {"no_backend": 2}


async def test_a_stream_cut_after_its_last_token_gets_its_usage_and_done(
    start_sim: Any, start_router: Any
) -> None:
    """The engine cuts right after its final chunk (finish_reason sent, usage and [DONE] not): there is
    nothing left to generate, so the router ends the stream itself, with the usage the client asked for."""
    sim = await start_sim()
    async with httpx.AsyncClient(timeout=20) as c:
        await c.post(f"{sim.urls[0]}/admin/faults", json={"specs": [f"disconnect-after={CUT_AFTER}"]})
    url = await start_router([Backend(id="e", url=sim.urls[0])])
    api = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0, timeout=60)
    stream = await api.completions.create(
        model=MODEL,
        prompt="a b c",
        max_tokens=CUT_AFTER,
        seed=SEED,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in stream]
    await api.close()
    text = "".join(c.text for chunk in chunks for c in chunk.choices)
    assert text.split() == _words(CUT_AFTER)
    assert [c.finish_reason for chunk in chunks for c in chunk.choices][-1] == "length"
    usages = [chunk.usage for chunk in chunks if chunk.usage is not None]
    assert [(u.prompt_tokens, u.completion_tokens) for u in usages] == [(3, CUT_AFTER)]
    assert len({chunk.id for chunk in chunks}) == 1
    assert (await _metrics(url))["broken_streams_total"] == {"finished": 1}


@pytest.mark.parametrize("client", ["lean", "aiohttp"])
async def test_a_whole_answer_cut_mid_body_reaches_the_client_cut(start_router: Any, client: str) -> None:
    """A length-framed answer the engine abandons half-way has no place for an event: the client's
    connection is cut (a short body read as complete would be silent truncation)."""

    async def half_an_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = b""
        with contextlib.suppress(asyncio.IncompleteReadError):
            head = await reader.readuntil(b"\r\n\r\n")
            while head.startswith(b"GET"):  # health probes and scrapes: an empty 200
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
                head = await reader.readuntil(b"\r\n\r\n")
        if not head.startswith(b"POST"):
            writer.close()
            return
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 200\r\n\r\n")
        writer.write(b'{"id": "cmpl-1", "choices": [{"text": "half')
        await writer.drain()
        writer.transport.abort()

    engine = await asyncio.start_server(half_an_answer, "127.0.0.1", 0)
    port = engine.sockets[0].getsockname()[1]
    url = await start_router([Backend(id="e", url=f"http://127.0.0.1:{port}")], upstream_client=client)
    async with httpx.AsyncClient(timeout=20) as c:
        with pytest.raises(httpx.RemoteProtocolError):
            await c.post(f"{url}/v1/completions", json={"model": MODEL, "prompt": "a", "max_tokens": 5})
    engine.close()
    assert (await _metrics(url))["broken_streams_total"] == {"cut": 1}
