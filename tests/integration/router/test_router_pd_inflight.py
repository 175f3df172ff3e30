"""A PD prefill leg counts as in flight on its prefill backend from its send until it ends (answered,
failed, or dropped with a client that went away), so a burst between two scrapes sees the prefill engines
it has already loaded. Fake engines hold the prefill leg at a gate while the test reads the router's
admin view."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import httpx
import pytest
from aiohttp import web

from infctl.router.snapshot import Backend

MODEL = "m"
LONG_PROMPT = " ".join(f"w{i}" for i in range(200))
BODY = {"model": MODEL, "prompt": LONG_PROMPT, "max_tokens": 4}


@dataclass
class FakeEngine:
    """A prefill or decode engine whose generation answers wait for ``gate`` (set: answer at once)."""

    url: str = ""
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    status: int = 200
    """What a generation request is answered with once the gate opens (503: the leg fails)."""


async def _complete(engine: FakeEngine, request: web.Request) -> web.Response:
    await request.read()
    engine.arrived.set()
    await engine.gate.wait()
    if engine.status != 200:
        return web.json_response({"error": {"message": "down"}}, status=engine.status)
    answer: dict[str, object] = {
        "id": "x",
        "choices": [{"index": 0, "text": " a", "finish_reason": "length"}],
    }
    answer["kv_transfer_params"] = {"remote_engine_id": "e"}  # what vLLM's decode leg is given
    return web.json_response(answer)


async def _ok(_: web.Request) -> web.Response:
    return web.json_response({})


StartEngine = Callable[[], Awaitable[FakeEngine]]


@pytest.fixture
async def start_engine() -> AsyncIterator[StartEngine]:
    runners: list[web.AppRunner] = []
    engines: list[FakeEngine] = []

    async def start() -> FakeEngine:
        engine = FakeEngine()
        engines.append(engine)

        async def complete(request: web.Request) -> web.Response:
            return await _complete(engine, request)

        app = web.Application()
        app.router.add_post("/v1/completions", complete)
        app.router.add_get("/{tail:.*}", _ok)
        runner = web.AppRunner(app, handler_cancellation=True)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        runners.append(runner)
        engine.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
        return engine

    yield start
    for engine in engines:
        engine.gate.set()  # a failed test leaves no handler waiting out the server's shutdown timeout
    for runner in runners:
        await runner.cleanup()


async def _inflight(c: httpx.AsyncClient, url: str) -> dict[str, int]:
    listed = (await c.get(f"{url}/admin/backends")).json()["backends"]
    return {b["id"]: int(b["inflight"]) for b in listed}


async def _until_idle(c: httpx.AsyncClient, url: str, backend_id: str) -> dict[str, int]:
    """The in-flight counts once ``backend_id`` has none (they must reach 0: the test fails otherwise)."""
    for _ in range(500):
        counts = await _inflight(c, url)
        if counts[backend_id] == 0:
            return counts
        await asyncio.sleep(0.01)
    raise AssertionError(f"{backend_id} still counts a request in flight: {counts}")


async def _pd_router(
    start_router: Callable[..., Awaitable[str]], prefill: FakeEngine, decode: FakeEngine, engine: str
) -> str:
    backends = [
        Backend(id="p", url=prefill.url, role="prefill", group="g0"),
        Backend(id="d", url=decode.url, role="decode", group="g0"),
    ]
    return await start_router(backends, engine=engine, pd_min_uncached_tokens=16, max_attempts=2)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
async def test_the_prefill_leg_is_in_flight_on_its_backend_until_it_answers(
    start_router, start_engine: StartEngine, engine: str
) -> None:
    prefill, decode = await start_engine(), await start_engine()
    decode.gate.set()
    url = await _pd_router(start_router, prefill, decode, engine)
    async with httpx.AsyncClient(timeout=20) as c:
        sent = asyncio.create_task(c.post(f"{url}/v1/completions", json=BODY))
        await asyncio.wait_for(prefill.arrived.wait(), 10)
        during = await _inflight(c, url)
        if engine == "sglang":
            # The parallel protocol: the decode leg answers while its prefill leg is still running.
            answer = await sent
            assert (await _inflight(c, url))["p"] == 1
            prefill.gate.set()
        else:
            prefill.gate.set()
            answer = await sent
        after = await _until_idle(c, url, "p")
    assert answer.status_code == 200, answer.text
    assert during["p"] == 1
    assert after == {"p": 0, "d": 0}


async def test_a_failed_prefill_leg_is_released_and_the_request_retried(
    start_router, start_engine: StartEngine
) -> None:
    prefill, decode = await start_engine(), await start_engine()
    decode.gate.set()
    prefill.status = 503
    url = await _pd_router(start_router, prefill, decode, "vllm")
    async with httpx.AsyncClient(timeout=20) as c:
        sent = asyncio.create_task(c.post(f"{url}/v1/completions", json=BODY))
        await asyncio.wait_for(prefill.arrived.wait(), 10)
        during = await _inflight(c, url)
        prefill.gate.set()
        answer = await sent
        after = await _until_idle(c, url, "p")
    assert answer.status_code == 200, answer.text  # prefilled on the decode engine itself
    assert during["p"] == 1
    assert after == {"p": 0, "d": 0}


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
async def test_a_client_gone_during_the_prefill_leg_releases_it(
    start_router, start_engine: StartEngine, engine: str
) -> None:
    prefill, decode = await start_engine(), await start_engine()
    if engine == "vllm":
        decode.gate.set()  # sequential: the client leaves during the prefill, before any decode leg
    url = await _pd_router(start_router, prefill, decode, engine)
    async with httpx.AsyncClient(timeout=20) as admin:
        async with httpx.AsyncClient(timeout=20) as client:
            sent = asyncio.create_task(client.post(f"{url}/v1/completions", json=BODY))
            await asyncio.wait_for(prefill.arrived.wait(), 10)
            during = await _inflight(admin, url)
            sent.cancel()
        after = await _until_idle(admin, url, "p")
        after = await _until_idle(admin, url, "d")
    assert during["p"] == 1
    assert after == {"p": 0, "d": 0}
