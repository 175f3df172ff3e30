"""vLLM PD (NIXL) with two prefill engines on one host: each names its own side-channel port in its answer's
``kv_transfer_params`` (``--target local`` gives each engine its own ``VLLM_NIXL_SIDE_CHANNEL_PORT``), and
the router's decode leg carries that port, unchanged, to the decode. The router needs no setting for it:
a spy in front of the decode records what each decode leg carried, and the simulated decode handshakes
with the prefill the port names (a port of the other prefill fails, as vLLM's engine-id check does)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import httpx
import pytest
from aiohttp import web
from test_router_pd_bootstrap import twice_on_each_prefill

from infctl.router.snapshot import Backend
from infctl.telemetry.prometheus import parse_metrics, value

SIDE = 18040
"""The simulated engines' first side-channel port: prefill i reports SIDE + i (reported, never bound)."""


@pytest.fixture
async def spy() -> AsyncIterator[Any]:
    """``url, seen = await spy(upstream)``: a proxy of ``upstream`` recording each generation body."""
    runners: list[web.AppRunner] = []
    session = aiohttp.ClientSession()

    async def start(upstream: str) -> tuple[str, list[dict[str, Any]]]:
        seen: list[dict[str, Any]] = []

        async def forward(request: web.Request) -> web.Response:
            data = await request.read()
            if request.method == "POST" and request.path.endswith("completions"):
                seen.append(json.loads(data))
            wanted = ("content-type", "x-request-id")
            headers = {k: v for k, v in request.headers.items() if k.lower() in wanted}
            async with session.request(request.method, upstream + request.path_qs, data=data,
                                       headers=headers) as resp:  # fmt: skip
                body = await resp.read()
                kind = resp.headers.get("Content-Type", "application/json")
                return web.Response(body=body, status=resp.status, headers={"Content-Type": kind})

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", forward)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        runners.append(runner)
        return f"http://127.0.0.1:{runner.addresses[0][1]}", seen

    yield start
    for runner in runners:
        await runner.cleanup()
    await session.close()


async def test_each_decode_leg_carries_its_prefills_own_side_channel_port(
    start_sim: Any, start_router: Any, spy: Any
) -> None:
    sim = await start_sim(personality="vllm", instances=3, roles=("prefill", "prefill", "decode"),
                          nixl_side_channel_port=SIDE)  # fmt: skip
    p0, p1, decode = sim.instances
    decode_url, seen = await spy(decode.url)
    fleet = [
        Backend(id="p0", url=p0.url, role="prefill", group="g0"),
        Backend(id="p1", url=p1.url, role="prefill", group="g0"),
        Backend(id="d", url=decode_url, role="decode", group="g0"),
    ]
    url = await start_router(fleet, engine="vllm", pd_min_uncached_tokens=16)
    async with httpx.AsyncClient(timeout=30) as c:
        answers = await twice_on_each_prefill(c, url)
        metrics = parse_metrics((await c.get(f"{url}/metrics")).text)
    assert all(a.status_code == 200 for a in answers), [a.text for a in answers]
    assert value(metrics, "infctl_router_retries_total") == 0
    carried = [body["kv_transfer_params"] for body in seen]
    assert [(p["remote_host"], p["remote_port"], p["remote_engine_id"]) for p in carried] == [
        ("127.0.0.1", SIDE, p0.engine_id), ("127.0.0.1", SIDE, p0.engine_id),
        ("127.0.0.1", SIDE + 1, p1.engine_id), ("127.0.0.1", SIDE + 1, p1.engine_id),
    ]  # fmt: skip
    assert all(p["do_remote_prefill"] is True for p in carried)
