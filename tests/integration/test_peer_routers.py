"""The peer routers from PyPI (sglang-router, vllm-router) route to the simulated engine.

Marked slow: the peers are Rust binaries installed outside the dev environment (``.ci/slow`` makes a venv for
them). Point ``INFCTL_PEERS_BIN`` at that venv's ``bin`` directory, or put them on PATH.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.slow

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def _peer(name: str) -> str:
    bin_dir = os.environ.get("INFCTL_PEERS_BIN")
    found = str(Path(bin_dir) / name) if bin_dir and (Path(bin_dir) / name).exists() else shutil.which(name)
    if not found:
        pytest.skip(f"{name} not installed (pip install {name}; set INFCTL_PEERS_BIN to its bin directory)")
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _commands(name: str, port: int, workers: list[str]) -> list[str]:
    exe = _peer(name)
    # Their metrics exporter listens on 29000 by default, and a router that cannot bind it exits at start
    # (here another peer router held it, a benchmark's): a free port each.
    common = ["--host", "127.0.0.1", "--port", str(port), "--policy", "cache_aware",
              "--prometheus-host", "127.0.0.1", "--prometheus-port", str(_free_port()),
              "--worker-urls", *workers]  # fmt: skip
    return [exe, "launch", *common] if name == "sglang-router" else [exe, *common]


async def _wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path, deadline_s: float = 180) -> None:
    """Until the router serves a completion: it starts, then finds the workers healthy. A deadline, not a
    count of tries, since each try may wait its own 2 s timeout; generous, for a loaded machine."""
    t0 = time.monotonic()
    last = "no answer yet"
    async with httpx.AsyncClient(timeout=2) as c:
        while time.monotonic() < t0 + deadline_s:
            if proc.poll() is not None:
                raise AssertionError(f"router exited {proc.returncode}: {log.read_text()[-2000:]}")
            try:
                r = await c.post(
                    f"{url}/v1/completions", json={"model": MODEL, "prompt": "warm up", "max_tokens": 1}
                )
                if r.status_code == 200:
                    return
                last = f"{r.status_code} {r.text[:200]}"
            except httpx.HTTPError as exc:
                last = repr(exc)
            await asyncio.sleep(0.1)
    tail = log.read_text()[-2000:]
    raise AssertionError(f"router not serving after {deadline_s:.0f} s (last: {last}): {tail}")


@pytest.mark.parametrize("name", ["sglang-router", "vllm-router"])
async def test_peer_router_streams_chat_from_the_simulator(name: str, start_sim, tmp_path: Path) -> None:
    sim = await start_sim(instances=2, time_scale=0.05)
    port = _free_port()
    log = tmp_path / f"{name}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(_commands(name, port, list(sim.urls)), stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        await _wait_ready(url, proc, log)
        body = {
            "model": MODEL,
            "messages": [{"role": "user", "content": "tell me something"}],
            "max_tokens": 8,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        async with httpx.AsyncClient(timeout=20) as c:
            r = await c.post(f"{url}/v1/chat/completions", json=body)
            assert r.status_code == 200, r.text
            events = [ln[6:] for ln in r.text.splitlines() if ln.startswith("data: ")]
            assert events[-1] == "[DONE]"
            chunks = [json.loads(e) for e in events[:-1]]
            text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
            assert len(text.split()) == 8
            assert chunks[-1]["usage"]["completion_tokens"] == 8
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
