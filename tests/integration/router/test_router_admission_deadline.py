"""Admission's deadline, live on both fronts: a request held while every backend is saturated is refused with
a 429 and ``Retry-After`` once it has waited ``admission_deadline_s``.

The wait is ``asyncio.wait_for``, which since Python 3.12 is an ``asyncio.timeout`` and needs a current
task: started from the lean front's protocol callback outside a task (the 3.11 stand-in for eager tasks,
used on every version until then), the held request was answered 500 on 3.12 and 3.13 instead of queueing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from infctl.router.snapshot import Backend
from infctl.telemetry.prometheus import parse_metrics

StartSim = Callable[..., Awaitable[Any]]
StartRouter = Callable[..., Awaitable[str]]

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


async def test_a_request_held_past_the_deadline_gets_a_429_not_a_500(
    start_sim: StartSim, start_router: StartRouter
) -> None:
    # One sequence at a time; 1,000 tokens at time scale 1 keep the engine busy for seconds.
    sim = await start_sim(time_scale=1.0, max_num_seqs=1)
    # Signals usable for 30 s: a stale scrape would not count as saturation, and nothing would be held.
    policy = {"preset": "least_load", "settings": {"saturation_queue": 1, "stale_after_s": 30.0}}
    url = await start_router(
        [Backend(id=sim.urls[0], url=sim.urls[0])], policy=policy, admission_queue=4, admission_deadline_s=1
    )
    long_body = {"model": MODEL, "prompt": "a b c", "max_tokens": 1000}
    async with httpx.AsyncClient(timeout=60) as c:
        # The engine runs one and queues the other: saturated (queue 1) once a scrape has seen it.
        busy = [asyncio.create_task(c.post(f"{url}/v1/completions", json=long_body)) for _ in range(2)]
        async with asyncio.timeout(30):
            while ((await c.get(f"{url}/admin/backends")).json()["backends"][0]["queue"] or 0) < 1:
                assert not any(t.done() for t in busy), [t.result().text for t in busy if t.done()]
                await asyncio.sleep(0.02)
        # A fresh connection: on the lean front this request starts in the protocol's callback.
        async with httpx.AsyncClient(timeout=60) as fresh:
            held = await fresh.post(
                f"{url}/v1/completions", json={"model": MODEL, "prompt": "x y", "max_tokens": 2}
            )
        metrics = (await c.get(f"{url}/metrics")).text
        assert not any(t.done() for t in busy)  # still saturated: the 429 is the deadline's, not a race
        for t in busy:
            t.cancel()
    assert held.status_code == 429, held.text
    assert held.json()["error"]["type"] == "RateLimitError"
    assert "admission_deadline" in held.json()["error"]["message"]
    assert held.headers["retry-after"] == "1"  # nothing drained yet: the deadline's whole seconds
    rejected = parse_metrics(metrics, {"infctl_router_rejected_total"})["infctl_router_rejected_total"]
    assert [(s.labels, s.value) for s in rejected] == [({"reason": "admission_deadline"}, 1.0)]
