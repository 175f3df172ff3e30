"""Relay edge cases against real sockets: what counts as "nothing reached the client yet"."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from infctl.router.snapshot import Backend
from infctl.telemetry.prometheus import parse_metrics, value

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
HEAD_ONLY = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


@pytest.fixture
async def head_then_death() -> AsyncIterator[str]:
    """An engine that answers every request with a 200 head and then drops the connection."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(HEAD_ONLY)
        await writer.drain()
        writer.transport.abort()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.close()


async def test_engine_dying_after_its_head_but_before_a_token_is_retried_elsewhere(
    head_then_death: str, start_sim, start_router
) -> None:
    sim = await start_sim()
    backends = [Backend(id="dies", url=head_then_death), Backend(id="ok", url=sim.urls[0])]
    url = await start_router(backends, policy="round_robin")
    body = {"model": MODEL, "prompt": "a b c", "max_tokens": 3, "stream": True}
    async with httpx.AsyncClient(timeout=10) as c:
        answers = [await c.post(f"{url}/v1/completions", json=body) for _ in range(4)]
        metrics = parse_metrics((await c.get(f"{url}/metrics")).text)
    assert [a.status_code for a in answers] == [200] * 4
    assert all(a.text.rstrip().endswith("data: [DONE]") for a in answers)
    assert value(metrics, "infctl_router_retries_total") >= 1
