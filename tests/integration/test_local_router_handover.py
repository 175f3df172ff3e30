"""A local release's router restarted through the supervisor's control endpoint (``POST /restart/router``)
while a client sends a steady stream of requests: the successor takes the port before the old router stops,
and no request is lost or refused. Guards are generous; nothing is timed."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import httpx

from infctl.local import LocalPlan, PortAllocator, ProcessSpec, SupervisorSettings, port_is_free, serve
from infctl.local.state import read_state

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
SETTINGS = SupervisorSettings(health_timeout=90, health_interval=0.05, grace_period=10)


async def _client(url: str, stop: asyncio.Event, outcomes: list[str]) -> None:
    async with httpx.AsyncClient(timeout=30) as c:
        n = 0
        while not stop.is_set():
            n += 1
            body = {"model": MODEL, "prompt": "a b c", "max_tokens": 8, "stream": n % 2 == 0}
            try:
                r = await c.post(f"{url}/v1/completions", json=body)
            except httpx.HTTPError as exc:
                outcomes.append(f"{type(exc).__name__}: {exc}")
                continue
            ok = r.status_code == 200 and (n % 2 or r.text.rstrip().endswith("data: [DONE]"))
            outcomes.append("ok" if ok else f"HTTP {r.status_code}: {r.text[-200:]!r}")


async def test_a_local_router_restart_hands_over_without_losing_a_request(
    start_sim: Any, tmp_path: Path
) -> None:
    sim = await start_sim()
    ports = PortAllocator(26000 + os.getpid() % 4000, port_is_free)
    port, control = ports.take(), ports.take()
    config = tmp_path / "router.yaml"
    config.write_text(f"backends: [{{url: '{sim.urls[0]}'}}]\npolicy: round_robin\ntokenizer: words\n")
    argv = (sys.executable, "-m", "infctl", "router", "-f", str(config), "--port", str(port))
    router = ProcessSpec(name="router", kind="router", argv=argv, port=port, health_path="/ready")
    plan = LocalPlan(release="ho", run_dir=tmp_path, model=MODEL, specs=(router,), control_port=control)
    ready, stop = asyncio.Event(), asyncio.Event()
    supervisor = asyncio.create_task(serve(plan, SETTINGS, ready=ready, stop=stop))
    halt, outcomes = asyncio.Event(), list[str]()
    try:
        async with asyncio.timeout(180):  # guards against hanging, not measurements
            await ready.wait()
            before = read_state(tmp_path, "ho")
            client = asyncio.create_task(_client(router.url, halt, outcomes))
            while len(outcomes) < 20:
                await asyncio.sleep(0.01)
            async with httpx.AsyncClient(timeout=150) as c:
                answer = await c.post(f"http://127.0.0.1:{control}/restart/router")
                assert answer.status_code == 200, answer.text
                missing = await c.post(f"http://127.0.0.1:{control}/restart/nosuch")
            handed = len(outcomes)
            while len(outcomes) < handed + 20:
                await asyncio.sleep(0.01)
            halt.set()
            await client
            after = read_state(tmp_path, "ho")
    finally:
        stop.set()
        await supervisor
    assert [o for o in outcomes if o != "ok"] == []
    assert missing.status_code == 404
    assert before is not None and after is not None
    old, new = before.process("router"), after.process("router")
    assert (new.restarts, new.status) == (old.restarts + 1, "healthy")
    assert new.pid == answer.json()["pid"] != old.pid
