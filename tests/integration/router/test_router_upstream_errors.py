"""Upstream failures as the client and /metrics see them: requests whose client went away are still counted,
the router's own answers carry the request id. (Streams an engine cuts: ``test_router_stream_resume``.)"""

from __future__ import annotations

import asyncio

import httpx
import pytest

from infctl.router.snapshot import Backend
from infctl.telemetry.prometheus import parse_metrics

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


@pytest.mark.parametrize("client", ["lean", "aiohttp"])
async def test_a_request_whose_client_went_away_is_counted(start_sim, start_router, client: str) -> None:
    sim = await start_sim(time_scale=1.0)  # real time: 400 tokens take seconds, the client leaves first
    url = await start_router([Backend(id="e", url=sim.urls[0])], upstream_client=client)
    body = {"model": MODEL, "prompt": "a b c", "max_tokens": 400, "stream": True}
    async with httpx.AsyncClient(timeout=20) as c:
        async with c.stream("POST", f"{url}/v1/completions", json=body) as r:
            async for line in r.aiter_lines():
                if line.startswith("data: {"):
                    break  # leaving with the stream open: the client goes away
        async with asyncio.timeout(30):  # guards against hanging, not a measurement
            while True:
                metrics = parse_metrics((await c.get(f"{url}/metrics")).text)
                samples = metrics.get("infctl_router_requests_total", [])
                counted = {s.labels["status"]: s.value for s in samples}
                if counted:
                    break
                await asyncio.sleep(0.02)
    assert counted == {"client_gone": 1}
    e2e = [s.value for s in metrics["infctl_router_e2e_request_latency_seconds_count"]]
    ttft = [s.value for s in metrics["infctl_router_time_to_first_byte_seconds_count"]]
    assert e2e == [1] and ttft == [1]


async def test_the_routers_own_errors_carry_the_request_id(start_router) -> None:
    url = await start_router([Backend(id="dead", url="http://127.0.0.1:9")], max_attempts=1)
    async with httpx.AsyncClient(timeout=20) as c:
        r = await c.post(
            f"{url}/v1/completions",
            json={"model": MODEL, "prompt": "a", "max_tokens": 1},
            headers={"x-request-id": "mine-1"},
        )
    assert r.status_code in (502, 503)
    assert r.json()["error"]["code"] == r.status_code
    assert r.headers["x-request-id"] == "mine-1"


async def test_a_body_over_the_limit_is_a_counted_413_in_the_openai_shape(start_router) -> None:
    # The aiohttp front enforces the limit while reading; the lean front answers before routing (front.py):
    # the answer, its x-request-id and the count are the same on both (the fixture runs each).
    url = await start_router([Backend(id="e", url="http://127.0.0.1:9")], max_body_bytes=1024)
    async with httpx.AsyncClient(timeout=20) as c:
        big = {"model": MODEL, "prompt": "a " * 2000}
        r = await c.post(f"{url}/v1/completions", json=big, headers={"x-request-id": "big-1"})
        bad = await c.post(f"{url}/v1/completions", content=b"{nope", headers={"x-request-id": "bad-1"})
        metrics = parse_metrics((await c.get(f"{url}/metrics")).text)
    assert r.status_code == 413 and r.json()["error"]["code"] == 413
    assert r.headers["x-request-id"] == "big-1"
    assert bad.status_code == 400 and bad.headers["x-request-id"] == "bad-1"
    rejected = {s.labels["reason"]: s.value for s in metrics["infctl_router_rejected_total"]}
    assert rejected["body_too_large"] == 1 and rejected["bad_request"] == 1


async def test_wrong_method_and_unknown_path_answer_in_the_openai_shape(start_router) -> None:
    url = await start_router([Backend(id="e", url="http://127.0.0.1:9")])
    async with httpx.AsyncClient(timeout=20) as c:
        wrong = await c.get(f"{url}/v1/completions")
        missing = await c.post(f"{url}/v1/embeddingz", json={})
        ready = await c.get(f"{url}/health")
    assert wrong.status_code == 405 and wrong.headers["allow"] == "POST"
    assert wrong.json()["error"]["code"] == 405
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "NotFoundError"
    assert ready.status_code == 200  # the catch-all does not shadow real routes


async def test_metrics_carry_the_engines_own_prefix_cache_counters(start_sim, start_router) -> None:
    sim = await start_sim()
    url = await start_router([Backend(id="e", url=sim.urls[0])])
    prompt = " ".join(f"w{i}" for i in range(400))
    async with httpx.AsyncClient(timeout=20) as c:
        for _ in range(3):
            body = {"model": MODEL, "prompt": prompt, "max_tokens": 1}
            assert (await c.post(f"{url}/v1/completions", json=body)).status_code == 200
        async with asyncio.timeout(30):  # until a scrape has read the engine's counters after the requests
            while True:
                metrics = parse_metrics((await c.get(f"{url}/metrics")).text)
                series = metrics.get("infctl_router_engine_prefix_cache_hits_total", [])
                hits = {s.labels["backend"]: s.value for s in series}
                if hits.get("e", 0) > 0:
                    break
                await asyncio.sleep(0.05)
    series = metrics["infctl_router_engine_prefix_cache_queries_total"]
    queries = {s.labels["backend"]: s.value for s in series}
    assert 0 < hits["e"] <= queries["e"]
