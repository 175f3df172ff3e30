"""Scale-to-zero, live: with ``hold_when_empty_s`` a request that finds its pool (or the whole fleet) without
any backend waits in the admission queue, shows in ``infctl_router_pool_queue_depth`` (what the autoscaler
wakes the pool on), and is served once an engine is added through the admin API; none added: a 503 with
Retry-After. Without the setting, today's 503 at once."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from infctl.router.snapshot import Backend

StartSim = Callable[..., Awaitable[Any]]
StartRouter = Callable[..., Awaitable[str]]

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
BODY = {"model": MODEL, "prompt": "a b c", "max_tokens": 2}
BUCKETS = {
    "preset": "least_load",
    "buckets": [
        {"name": "short", "max_tokens": 64, "pools": ["short"], "spill_to": []},
        {"name": "long", "pools": ["long"]},
    ],
}


async def until(check: Callable[[], Awaitable[bool]], what: str) -> None:
    """Poll (not a fixed sleep: a loaded machine is slower to queue than an idle one)."""
    deadline = asyncio.get_running_loop().time() + 30
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, f"never {what}"
        await asyncio.sleep(0.02)


async def test_an_empty_fleet_holds_the_request_until_an_engine_is_added(
    start_sim: StartSim, start_router: StartRouter
) -> None:
    sim = await start_sim()
    url = await start_router([], policy="least_load", hold_when_empty_s=30, admission_queue=8)
    async with httpx.AsyncClient(timeout=60) as c:
        first = asyncio.create_task(c.post(f"{url}/v1/completions", json=BODY))

        async def held() -> bool:
            text = (await c.get(f"{url}/metrics")).text
            return "infctl_router_queue_depth 1.0" in text.splitlines()

        await until(held, "held the request")
        assert not first.done()
        added = await c.post(f"{url}/admin/backends", json={"url": sim.urls[0]})
        assert added.status_code == 201
        resp = await first
    assert resp.status_code == 200 and resp.json()["choices"][0]["text"]


async def test_a_pool_at_zero_holds_its_requests_and_reports_them_per_pool(
    start_sim: StartSim, start_router: StartRouter
) -> None:
    sim = await start_sim(instances=2)
    long_url, short_url = sim.urls
    url = await start_router(
        [Backend(id=long_url, url=long_url, pool="long")],
        policy=BUCKETS,
        hold_when_empty_s=30,
        admission_queue=8,
    )
    async with httpx.AsyncClient(timeout=60) as c:
        first = asyncio.create_task(c.post(f"{url}/v1/completions", json=BODY))

        async def held() -> bool:
            text = (await c.get(f"{url}/metrics")).text
            return 'infctl_router_pool_queue_depth{pool="short"} 1.0' in text.splitlines()

        await until(held, "held the short request for its pool")
        long = await c.post(f"{url}/v1/completions", json={**BODY, "prompt": " ".join(["w"] * 100)})
        assert long.status_code == 200  # the long pool has its engine: nothing held there
        assert not first.done()
        added = await c.post(f"{url}/admin/backends", json={"url": short_url, "pool": "short"})
        assert added.status_code == 201
        resp = await first
        assert resp.status_code == 200
        served = (await c.get(f"{url}/metrics")).text
    assert f'infctl_router_requests_total{{backend="{short_url}",status="2xx"}} 1.0' in served.splitlines()


async def test_no_engine_in_time_is_a_503_with_retry_after(start_router: StartRouter) -> None:
    url = await start_router([], policy="least_load", hold_when_empty_s=0.3, admission_queue=8)
    now = await start_router([], policy="least_load")
    async with httpx.AsyncClient(timeout=30) as c:
        late = await c.post(f"{url}/v1/completions", json=BODY)
        at_once = await c.post(f"{now}/v1/completions", json=BODY)
        metrics = (await c.get(f"{url}/metrics")).text
    assert late.status_code == 503 and late.headers["retry-after"] == "1"
    assert late.json()["error"]["type"] == "ServiceUnavailableError"
    assert 'infctl_router_rejected_total{reason="no_backend_after_hold"} 1.0' in metrics.splitlines()
    assert at_once.status_code == 503 and "retry-after" not in at_once.headers
