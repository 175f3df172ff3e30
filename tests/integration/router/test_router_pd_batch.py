"""A batch of completion prompts over vLLM PD (NIXL): vLLM's prefill answer carries one
``kv_transfer_params``, the first prompt's (``infctl.router.pd_batch``), so the router sends each prompt its
own prefill and decode leg and merges the decode answers into the one vLLM gives for the batch: one choice
per prompt and sample (``p * n + k``), usage summed. Spies in front of both engines record what each leg
carried."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest
from aiohttp import web
from test_router_pd_bootstrap import scraped
from test_router_pd_nixl import spy  # noqa: F401 - the fixture

from infctl import tokens
from infctl.engines import get_adapter
from infctl.router.snapshot import Backend
from infctl.telemetry.prometheus import parse_metrics

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
BLOCK = 16
"""The simulated engines' KV block, in tokens."""
LENGTHS = (40, 100, 200)
"""Each prompt's words: a token each for the simulated engines and the router's ``words`` tokenizer."""
OUTPUT = 5
MODEL = "meta-llama/Llama-3.1-8B-Instruct"


async def pd_fleet(start_sim: Any, start_router: Any, spy: Any) -> tuple[str, list[Any], list[Any], str]:  # noqa: F811
    """(router URL, prefill legs seen, decode legs seen, the decode engine's own URL)."""
    sim = await start_sim(personality="vllm", instances=2, roles=("prefill", "decode"))
    prefill, decode = sim.instances
    prefill_url, prefill_seen = await spy(prefill.url)
    decode_url, decode_seen = await spy(decode.url)
    fleet = [
        Backend(id="p", url=prefill_url, role="prefill", group="g0"),
        Backend(id="d", url=decode_url, role="decode", group="g0"),
    ]
    url = await start_router(fleet, engine="vllm", pd_min_uncached_tokens=16)
    return url, prefill_seen, decode_seen, decode.url


def batch(salt: int) -> list[str]:
    return [tokens.synth_words(n, salt=salt + i) for i, n in enumerate(LENGTHS)]


def each_prompt_had_its_own_legs(prompts: list[str], prefill_seen: list[Any], decode_seen: list[Any]) -> None:
    assert sorted(b["prompt"] for b in prefill_seen) == sorted(prompts)
    assert all(b["kv_transfer_params"]["do_remote_decode"] is True for b in prefill_seen)
    carried = {b["prompt"]: b["kv_transfer_params"] for b in decode_seen}
    assert sorted(carried) == sorted(prompts)
    for prompt, n in zip(prompts, LENGTHS, strict=True):
        assert carried[prompt]["remote_block_ids"] == list(range(math.ceil(n / BLOCK))), prompt[:20]


async def decisions(c: httpx.AsyncClient, url: str) -> dict[str, float]:
    metrics = parse_metrics((await c.get(f"{url}/metrics")).text)
    return {s.labels["reason"]: s.value for s in metrics.get("infctl_router_decisions_total", ())}


async def test_a_batch_gets_a_pd_request_per_prompt_merged_as_vllm_answers_it(
    start_sim: Any,
    start_router: Any,
    spy: Any,  # noqa: F811
) -> None:
    url, prefill_seen, decode_seen, decode = await pd_fleet(start_sim, start_router, spy)
    prompts = batch(salt=10)
    body = {"model": MODEL, "prompt": prompts, "max_tokens": OUTPUT}
    async with httpx.AsyncClient(timeout=30) as c:
        answer = await c.post(f"{url}/v1/completions", json=body)
        alone = await c.post(f"{decode}/v1/completions", json=body)
        reasons = await decisions(c, url)
    assert answer.status_code == 200, answer.text
    data = answer.json()
    assert [c["index"] for c in data["choices"]] == [0, 1, 2]
    assert all(c["text"] and c["finish_reason"] == "length" for c in data["choices"])
    # The engine serving the batch on its own counts the same tokens.
    assert {k: data["usage"][k] for k in ("prompt_tokens", "completion_tokens", "total_tokens")} == {
        k: alone.json()["usage"][k] for k in ("prompt_tokens", "completion_tokens", "total_tokens")
    }
    assert data["usage"]["prompt_tokens"] == sum(LENGTHS)
    assert data["usage"]["completion_tokens"] == 3 * OUTPUT
    assert answer.headers["x-request-id"]
    assert reasons == {"disaggregated": 1}
    each_prompt_had_its_own_legs(prompts, prefill_seen, decode_seen[:3])


@pytest.mark.parametrize("n", [1, 2])
async def test_a_streamed_batch_interleaves_its_prompts_and_sums_their_usage(
    start_sim: Any,
    start_router: Any,
    spy: Any,  # noqa: F811
    n: int,
) -> None:
    url, prefill_seen, decode_seen, _ = await pd_fleet(start_sim, start_router, spy)
    prompts = batch(salt=20 + n)
    body = {"model": MODEL, "prompt": prompts, "max_tokens": OUTPUT, "n": n, "stream": True,
            "stream_options": {"include_usage": True}}  # fmt: skip
    async with (
        httpx.AsyncClient(timeout=30) as c,
        c.stream("POST", f"{url}/v1/completions", json=body) as resp,
    ):
        raw = (await resp.aread()).decode()
    assert resp.status_code == 200, raw
    assert resp.headers["content-type"].startswith("text/event-stream")
    events = [e[6:] for e in raw.split("\n\n") if e.startswith("data: ")]
    assert events[-1] == "[DONE]" and events.count("[DONE]") == 1
    chunks = [json.loads(e) for e in events[:-1]]
    usage = [ch["usage"] for ch in chunks if ch.get("usage")]
    assert len(usage) == 1 and chunks[-1]["usage"] == usage[0] and chunks[-1]["choices"] == []
    assert usage[0]["prompt_tokens"] == sum(LENGTHS)
    assert usage[0]["completion_tokens"] == usage[0]["total_tokens"] - sum(LENGTHS) == 3 * n * OUTPUT
    finished = sorted(c["index"] for ch in chunks for c in ch["choices"] if c.get("finish_reason"))
    assert finished == list(range(3 * n))
    each_prompt_had_its_own_legs(prompts, prefill_seen, decode_seen)


DP_SIZE = 4
DP_HEADER = get_adapter("sglang").dp_rank_header or ""


@pytest.fixture
async def sglang_dp_pd() -> AsyncIterator[tuple[str, str, list[str]]]:
    """(prefill URL, decode URL, conflicts): a PD prefill engine of ``DP_SIZE`` ranks and its decode, small
    aiohttp servers keeping SGLang's batch rules (``test_router_pd_dp_rooms`` has the single-prompt ones):
    ``GenerateReqInput`` gives prompt i ``bootstrap_room[i]`` of a list, ``room + i`` of an integer
    (``_normalize_bootstrap_params``); each prompt runs on the pinned rank (``routed_dp_rank``) or else on
    its room's, and a pinned rank other than its room's fails its transfer ("follow_bootstrap_room
    conflict"); the decode fetches each prompt's KV by its room."""
    conflicts: list[str] = []
    rooms: dict[int, asyncio.Future[bool]] = {}

    def meet(room: int) -> asyncio.Future[bool]:
        return rooms.setdefault(room, asyncio.get_running_loop().create_future())

    def each_room(body: dict[str, Any]) -> list[int]:
        room, count = body["bootstrap_room"], len(body["prompt"])
        return list(room) if isinstance(room, list) else [room + i for i in range(count)]

    def answer(ok: list[bool]) -> web.Response:
        if not all(ok):
            failed = {"object": "error", "message": "KV transfer failed", "code": 500}
            return web.json_response(failed, status=500)
        choices = [{"index": i, "text": " ok", "finish_reason": "length"} for i in range(len(ok))]
        usage = {"prompt_tokens": len(ok), "completion_tokens": len(ok), "total_tokens": 2 * len(ok)}
        return web.json_response({"choices": choices, "usage": usage})

    async def prefill(request: web.Request) -> web.Response:
        body = await request.json()
        pins = (request.headers.get(DP_HEADER), body.get("routed_dp_rank"), body.get("data_parallel_rank"))
        pin, ok = next((int(p) for p in pins if p is not None), None), []
        assert pin is not None, "the router pins every leg to its backend's rank"
        for room in each_room(body):
            ok.append(pin == room % DP_SIZE)
            if not ok[-1]:
                conflicts.append(f"pinned to rank {pin} but bootstrap_room {room} implies {room % DP_SIZE}")
            meet(room).set_result(ok[-1])
        return answer(ok)

    async def decode(request: web.Request) -> web.Response:
        body = await request.json()
        return answer([await asyncio.wait_for(meet(room), 10) for room in each_room(body)])

    async def metrics(_: web.Request) -> web.Response:
        names = ("sglang:num_queue_reqs", "sglang:num_running_reqs", "sglang:token_usage")
        lines = [f'{n}{{model_name="{MODEL}",dp_rank="{r}"}} 0' for r in range(DP_SIZE) for n in names]
        return web.Response(text="\n".join(lines) + "\n")

    async with engine_pair(prefill, decode, metrics) as (prefill_url, decode_url):
        yield prefill_url, decode_url, conflicts


@contextlib.asynccontextmanager
async def engine_pair(
    prefill: Handler, decode: Handler, metrics: Handler | None = None
) -> AsyncIterator[list[str]]:
    """The URLs of two small engines, a prefill's and a decode's, serving ``/v1/completions`` with
    ``prefill`` and ``decode`` (a client gone cancels the handler), ``/health``, and ``/metrics`` if given."""

    async def health(_: web.Request) -> web.Response:
        return web.Response()

    runners, urls = [], []
    try:
        for handler in (prefill, decode):
            app = web.Application()
            app.router.add_post("/v1/completions", handler)
            app.router.add_get("/health", health)
            if metrics is not None:
                app.router.add_get("/metrics", metrics)
            runner = web.AppRunner(app, handler_cancellation=True)
            runners.append(runner)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", 0).start()
            urls.append(f"http://127.0.0.1:{runner.addresses[0][1]}")
        yield urls
    finally:
        for runner in runners:
            await runner.cleanup()


@pytest.mark.parametrize("dp_size", [DP_SIZE, None])
async def test_an_sglang_batch_gets_a_room_per_prompt_on_the_pinned_rank(
    sglang_dp_pd: tuple[str, str, list[str]], start_router: Any, dp_size: int | None
) -> None:
    """Right with the engine's rank count or without it (``DP_SIZE`` divides the fallback stride); without
    it, every room drawn is counted."""
    prefill, decode, conflicts = sglang_dp_pd
    backends = [
        Backend(
            id=f"p{r}", url=prefill, dp_rank=r, dp_size=dp_size, engine="sglang", role="prefill", group="g0"
        )
        for r in range(DP_SIZE)
    ]
    backends.append(Backend(id="d", url=decode, engine="sglang", role="decode", group="g0"))
    url = await start_router(backends, engine="sglang", pd_min_uncached_tokens=16)
    body = {"model": MODEL, "prompt": batch(salt=40), "max_tokens": 2}
    async with httpx.AsyncClient(timeout=30) as c:
        await scraped(c, url)
        answers = [await c.post(f"{url}/v1/completions", json=body) for _ in range(4)]
        reasons = await decisions(c, url)
        metrics = parse_metrics((await c.get(f"{url}/metrics")).text)
    fallback = sum(s.value for s in metrics.get("infctl_router_pd_rooms_without_dp_size_total", ()))
    assert fallback == (0 if dp_size else 4 * len(LENGTHS))
    assert conflicts == []
    assert [a.status_code for a in answers] == [200] * 4, [a.text for a in answers]
    assert all(len(a.json()["choices"]) == len(LENGTHS) for a in answers)
    assert reasons == {"disaggregated": 4}


@pytest.fixture
async def vllm_pd_fakes() -> AsyncIterator[tuple[str, str, dict[str, int]]]:
    """(prefill URL, decode URL, legs): a vLLM PD pair whose decode legs misbehave by prompt. A prompt
    starting ``cut`` streams one event, then its connection breaks; one starting ``fail`` fails its decode
    leg after a moment: a 500 for a whole answer, a connection closed without an answer for a stream. One
    starting ``slow`` holds its decode leg open (a stream: after one event) until the router closes it;
    ``legs`` counts such legs ``held`` and ``closed``."""
    legs = {"held": 0, "closed": 0}

    async def prefill(request: web.Request) -> web.Response:
        await request.read()
        params = {"do_remote_prefill": True, "remote_block_ids": [0], "remote_engine_id": "e"}
        choice = {"index": 0, "text": " x", "finish_reason": "length"}
        return web.json_response({"choices": [choice], "kv_transfer_params": params})

    async def decode(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        if body["prompt"].startswith("cut"):
            out = web.StreamResponse(headers={"content-type": "text/event-stream"})
            await out.prepare(request)
            chunk = {"id": "c", "object": "text_completion", "choices": [{"index": 0, "text": " b"}]}
            await out.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            await asyncio.sleep(0.3)
            assert request.transport is not None
            request.transport.abort()
            return out
        if body["prompt"].startswith("fail"):
            await asyncio.sleep(0.3)
            if not body.get("stream"):
                return web.json_response({"object": "error", "message": "boom", "code": 500}, status=500)
            assert request.transport is not None
            request.transport.close()
            return web.Response()
        legs["held"] += 1
        try:
            if body.get("stream"):
                out = web.StreamResponse(headers={"content-type": "text/event-stream"})
                await out.prepare(request)
                chunk = {"id": "c", "object": "text_completion", "choices": [{"index": 0, "text": " a"}]}
                await out.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            for _ in range(250):
                if request.transport is None or request.transport.is_closing():
                    legs["closed"] += 1
                    break
                await asyncio.sleep(0.02)
        except (asyncio.CancelledError, ConnectionResetError):
            legs["closed"] += 1
            raise
        return web.Response()

    async with engine_pair(prefill, decode) as (prefill_url, decode_url):
        yield prefill_url, decode_url, legs


@pytest.mark.parametrize("stream", [False, True])
async def test_a_failed_decode_leg_ends_the_batchs_other_legs(
    vllm_pd_fakes: tuple[str, str, dict[str, int]], start_router: Any, stream: bool
) -> None:
    """The batch is retried whole or refused: its other decode legs must not run on, unread, to their end
    (a vLLM engine stops a generation only when its client goes away)."""
    prefill, decode, legs = vllm_pd_fakes
    fleet = [
        Backend(id="p", url=prefill, role="prefill", group="g0"),
        Backend(id="d", url=decode, role="decode", group="g0"),
    ]
    url = await start_router(fleet, engine="vllm", pd_min_uncached_tokens=16, max_attempts=1)
    body = {"model": MODEL, "prompt": ["slow " * 40, "fail " * 40], "max_tokens": 4, "stream": stream}
    async with httpx.AsyncClient(timeout=30) as c:
        answer = await c.post(f"{url}/v1/completions", json=body)
    assert answer.status_code >= 500, answer.text
    await every_held_leg_closed(legs)
    assert legs["held"] >= 1, legs


async def every_held_leg_closed(legs: dict[str, int]) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + 2.0
    while legs["closed"] < legs["held"] and loop.time() < end:
        await asyncio.sleep(0.02)
    assert legs["closed"] == legs["held"], legs


async def test_a_decode_leg_broken_mid_stream_ends_the_batchs_stream_with_an_error_event(
    vllm_pd_fakes: tuple[str, str, dict[str, int]], start_router: Any
) -> None:
    """The client has events already: the stream ends with an in-band error (a batch is never continued),
    and the other legs are closed."""
    prefill, decode, legs = vllm_pd_fakes
    fleet = [
        Backend(id="p", url=prefill, role="prefill", group="g0"),
        Backend(id="d", url=decode, role="decode", group="g0"),
    ]
    url = await start_router(fleet, engine="vllm", pd_min_uncached_tokens=16)
    body = {"model": MODEL, "prompt": ["slow " * 40, "cut " * 40], "max_tokens": 4, "stream": True}
    async with (
        httpx.AsyncClient(timeout=30) as c,
        c.stream("POST", f"{url}/v1/completions", json=body) as resp,
    ):
        raw = (await resp.aread()).decode()
    events = [e[6:] for e in raw.split("\n\n") if e.startswith("data: ")]
    assert resp.status_code == 200 and events[-1] == "[DONE]", raw
    chunks = [json.loads(e) for e in events[:-1]]
    assert sorted(c["choices"][0]["index"] for c in chunks if c.get("choices")) == [0, 1], raw
    assert "error" in chunks[-1] and "a batch" in chunks[-1]["error"]["message"], raw
    await every_held_leg_closed(legs)
    assert legs["held"] == 1, legs
