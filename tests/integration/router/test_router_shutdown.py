"""``infctl router`` as a process: SIGTERM drains what is in flight, then exits at once (code 0)."""

from __future__ import annotations

import asyncio
import signal
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.slow  # each test starts a router process (~2 s of imports on this machine)

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
EXIT_BOUND_S = 10.0
"""Well under the default drain timeout (30 s): a router that waited for it with nothing in flight fails."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


Started = tuple[asyncio.subprocess.Process, str]


@pytest.fixture
async def router_process() -> AsyncIterator[Callable[[str], Awaitable[Started]]]:
    """``proc, url = await start(backend_url)``: ``python -m infctl router`` in its own process, ready."""
    procs: list[asyncio.subprocess.Process] = []

    async def start(backend: str) -> Started:
        port = _free_port()
        argv = ["-m", "infctl", "router", "--port", str(port), "--policy", "round_robin"]
        argv += ["--backend", backend]
        proc = await asyncio.create_subprocess_exec(
            sys.executable, *argv, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
        )
        procs.append(proc)
        url = f"http://127.0.0.1:{port}"
        # A deadline, not a count of tries: a new interpreter's imports take seconds on a loaded machine.
        deadline = asyncio.get_running_loop().time() + 60.0
        async with httpx.AsyncClient() as c:
            while asyncio.get_running_loop().time() < deadline:
                assert proc.returncode is None, "the router exited during start-up"
                try:
                    if (await c.get(f"{url}/ready")).status_code == 200:
                        return proc, url
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.025)
        raise AssertionError("the router never became ready")

    yield start
    for proc in procs:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_sigterm_with_nothing_in_flight_exits_cleanly_without_waiting_for_the_drain_timeout(
    start_sim: Callable[..., Awaitable[Any]], router_process: Any
) -> None:
    sim = await start_sim()
    proc, url = await router_process(sim.urls[0])
    async with httpx.AsyncClient() as c:  # a keep-alive client connection left idle must not hold the exit
        assert (await c.get(f"{url}/health")).status_code == 200
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), EXIT_BOUND_S) == 0


async def test_sigterm_lets_an_in_flight_stream_finish_then_exits(
    start_sim: Callable[..., Awaitable[Any]], router_process: Any
) -> None:
    # 24 tokens at real time take a few hundred milliseconds: the signal lands mid-stream.
    sim = await start_sim(time_scale=1.0)
    proc, url = await router_process(sim.urls[0])
    body = {"model": MODEL, "prompt": "a b c", "max_tokens": 24, "stream": True, "ignore_eos": True}
    async with httpx.AsyncClient(timeout=30) as c, c.stream("POST", f"{url}/v1/completions", json=body) as r:
        assert r.status_code == 200
        lines = r.aiter_lines()
        first = await anext(lines)
        assert first.startswith("data: ")
        proc.send_signal(signal.SIGTERM)
        rest = [line async for line in lines]
    assert [x for x in rest if x][-1] == "data: [DONE]"
    tokens = [x for x in [first, *rest] if x.startswith("data: {")]
    assert len(tokens) >= 24  # every token reached the client: the drain did not cut the stream
    assert await asyncio.wait_for(proc.wait(), EXIT_BOUND_S) == 0
