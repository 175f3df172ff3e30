"""Admission per pool, live: with length buckets a saturated long pool holds long requests back but lets
short ones through at once (they neither wait nor queue behind the long ones)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from infctl.router.snapshot import Backend

StartSim = Callable[..., Awaitable[Any]]
StartRouter = Callable[..., Awaitable[str]]

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
POLICY = {
    "preset": "least_load",
    # Signals usable for 30 s: a scrape later than the default 0.2 s would make the idle short engine look
    # saturated too, and the short request would wait like a long one.
    "settings": {"saturation_queue": 1, "stale_after_s": 30.0},
    "buckets": [
        {"name": "short", "max_tokens": 64, "pools": ["short"], "spill_to": []},
        {"name": "long", "pools": ["long"]},
    ],
}


async def test_a_saturated_long_pool_does_not_hold_short_requests(
    start_sim: StartSim, start_router: StartRouter
) -> None:
    sim = await start_sim(time_scale=1.0, max_num_seqs=1, instances=2)
    short_url, long_url = sim.urls
    url = await start_router(
        [Backend(id=short_url, url=short_url, pool="short"), Backend(id=long_url, url=long_url, pool="long")],
        policy=POLICY,
        admission_queue=8,
        admission_deadline_s=20,
    )
    long_body = {"model": MODEL, "prompt": " ".join(["w"] * 200), "max_tokens": 80}
    short_body = {"model": MODEL, "prompt": "a b c", "max_tokens": 2}
    seen: list[str] = []

    async def until(what: str, check: Callable[[], Awaitable[bool]]) -> None:
        """Poll (not a fixed sleep: a loaded machine scrapes and queues later than an idle one)."""
        deadline = asyncio.get_running_loop().time() + 30
        while not await check():
            assert asyncio.get_running_loop().time() < deadline, f"never {what}: {seen[-5:]}"
            await asyncio.sleep(0.02)

    async with httpx.AsyncClient(timeout=60) as c:

        async def long_pool_saturated() -> bool:
            backends = (await c.get(f"{url}/admin/backends")).json()["backends"]
            seen.append(str([(b["pool"], b["queue"], b["running"]) for b in backends]))
            return any(b["url"] == long_url and (b["queue"] or 0) >= 1 for b in backends)

        async def one_waiting() -> bool:
            nonlocal queued
            queued = (await c.get(f"{url}/metrics")).text
            depth = [x for x in queued.splitlines() if x.startswith("infctl_router_queue_depth")]
            seen.append(str(depth))
            return "infctl_router_queue_depth 1.0" in depth

        queued = ""
        # The long engine runs one (max_num_seqs=1) and queues the rest, ~0.7 s each: a window of seconds.
        longs = [asyncio.create_task(c.post(f"{url}/v1/completions", json=long_body)) for _ in range(4)]
        await until("saw the long pool saturated", long_pool_saturated)
        more_long = asyncio.create_task(c.post(f"{url}/v1/completions", json=long_body))
        await until("held the fifth long request", one_waiting)
        short = await c.post(f"{url}/v1/completions", json=short_body)
        assert short.status_code == 200
        assert not more_long.done()  # still waiting for the long pool
        results = await asyncio.gather(*longs, more_long)
    # Only the long request waited (judged across all backends, the idle short engine admitted it).
    assert "infctl_router_queue_depth 1.0" in queued.splitlines()
    assert [r.status_code for r in results] == [200] * 5


async def test_a_prompt_over_the_bound_is_refused_before_tokenising(
    start_sim: StartSim, start_router: StartRouter
) -> None:
    sim = await start_sim()
    url = await start_router([Backend(id=sim.urls[0], url=sim.urls[0])], max_prompt_chars=100)
    async with httpx.AsyncClient(timeout=30) as c:
        big = await c.post(
            f"{url}/v1/completions", json={"model": MODEL, "prompt": "x " * 100, "max_tokens": 1}
        )
        ok = await c.post(
            f"{url}/v1/completions", json={"model": MODEL, "prompt": "x " * 10, "max_tokens": 1}
        )
    assert big.status_code == 413 and "max_prompt_chars" in big.json()["error"]["message"]
    assert ok.status_code == 200
