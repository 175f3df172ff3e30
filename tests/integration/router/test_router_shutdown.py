"""``infctl router`` as a process, on both fronts: SIGTERM drains what is in flight, then exits at once (code
0). The drain timeout is long (``DRAIN_S``) and the guard on the exit shorter (``GUARD_S``), so a router that
waited for the timeout with nothing left in flight fails; how soon it exits is measured by hand (idle: ~0.1 s
here), not asserted."""

from __future__ import annotations

import asyncio
import signal
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
DRAIN_S = 120.0
"""The router's drain timeout (router.yaml ``drain_timeout_s``)."""
GUARD_S = 30.0
"""How long the test waits for the exit: generous for a loaded machine, far under ``DRAIN_S``."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


Started = tuple[asyncio.subprocess.Process, str, Path]
"""The process, its URL and its log (stderr)."""


@pytest.fixture
async def router_process(tmp_path: Path, server: str) -> AsyncIterator[Callable[[str], Awaitable[Started]]]:
    """``proc, url, log = await start(backend_url)``: ``python -m infctl router`` in its own process, ready,
    on this test's front with a ``DRAIN_S`` drain timeout."""
    procs: list[asyncio.subprocess.Process] = []

    async def start(backend: str) -> Started:
        port = _free_port()
        config = tmp_path / f"router-{port}.yaml"
        config.write_text(f"backends: [{{url: '{backend}'}}]\ndrain_timeout_s: {DRAIN_S}\n")
        argv = ["-m", "infctl", "router", "-f", str(config), "--server", server]
        argv += ["--port", str(port), "--policy", "round_robin"]
        log = tmp_path / f"router-{port}.log"
        with log.open("wb") as err:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, *argv, stdout=asyncio.subprocess.DEVNULL, stderr=err
            )
        procs.append(proc)
        url = f"http://127.0.0.1:{port}"
        # A deadline, not a count of tries: a new interpreter's imports take seconds on a loaded machine.
        deadline = asyncio.get_running_loop().time() + 60.0
        async with httpx.AsyncClient(timeout=30) as c:
            while asyncio.get_running_loop().time() < deadline:
                assert proc.returncode is None, f"the router exited during start-up: {log.read_text()}"
                try:
                    if (await c.get(f"{url}/ready")).status_code == 200:
                        return proc, url, log
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.025)
        raise AssertionError(f"the router never became ready: {log.read_text()}")

    yield start
    for proc in procs:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_sigterm_with_nothing_in_flight_exits_cleanly_without_waiting_for_the_drain_timeout(
    start_sim: Callable[..., Awaitable[Any]], router_process: Any
) -> None:
    sim = await start_sim()
    proc, url, log = await router_process(sim.urls[0])
    body = {"model": MODEL, "prompt": "a b c", "max_tokens": 2}
    # Keep-alive client connections left idle must not hold the exit: one the lean front serves itself
    # (generation), one it handed to aiohttp (any GET).
    async with httpx.AsyncClient(timeout=30) as gen, httpx.AsyncClient(timeout=30) as get:
        assert (await gen.post(f"{url}/v1/completions", json=body)).status_code == 200
        assert (await get.get(f"{url}/health")).status_code == 200
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), GUARD_S) == 0, log.read_text()


async def test_sigterm_lets_an_in_flight_stream_finish_then_exits(
    start_sim: Callable[..., Awaitable[Any]], router_process: Any
) -> None:
    # 24 tokens at real time take a few hundred milliseconds: the signal lands mid-stream.
    sim = await start_sim(time_scale=1.0)
    proc, url, log = await router_process(sim.urls[0])
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
    assert await asyncio.wait_for(proc.wait(), GUARD_S) == 0, (
        log.read_text()
    )  # once the stream ended, not at DRAIN_S
