"""A router restarted while a client sends a steady stream of requests, on both fronts: its successor starts
on the same port (SO_REUSEPORT), the old one hands over (SIGUSR1) and drains; no request is lost or refused.

This is what ``infctl.local.supervisor``'s ``hand_over`` does for a local release; here the two router
processes are started by the test. Guards are generous and nothing is timed."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import sys
from pathlib import Path
from typing import Any

import httpx

from infctl.local.procs import listens_on
from infctl.telemetry.prometheus import parse_metrics

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
GUARD_S = 90.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _router(config: Path, port: int, server: str, log: Path) -> asyncio.subprocess.Process:
    argv = ["-m", "infctl", "router", "-f", str(config), "--server", server, "--port", str(port)]
    with log.open("ab") as err:
        return await asyncio.create_subprocess_exec(
            sys.executable, *argv, stdout=asyncio.subprocess.DEVNULL, stderr=err
        )


async def _listening(proc: asyncio.subprocess.Process, port: int, log: Path) -> None:
    """Until ``proc`` listens on ``port`` and the port answers /ready."""
    async with httpx.AsyncClient(timeout=10) as c:
        while True:
            assert proc.returncode is None, log.read_text()
            if listens_on(proc.pid, port):
                with contextlib.suppress(httpx.HTTPError):
                    if (await c.get(f"http://127.0.0.1:{port}/ready")).status_code == 200:
                        return
            await asyncio.sleep(0.025)


RETRIED = (httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError)
"""What a client retries, as the OpenAI SDK does (APIConnectionError, 2 retries by default): a connection
refused, or reset before any answer. A connection still in the old router's accept queue when it stops
listening is reset by the kernel (Linux moves it to the successor only with net.ipv4.tcp_migrate_req=1);
its request was never read, so the retry neither loses nor duplicates it."""


async def _client(url: str, stop: asyncio.Event, outcomes: list[str], retries: list[str]) -> None:
    """Requests one after another, streamed and not, on a keep-alive connection pool: each outcome is
    ``ok``, or what went wrong (a connection refused or reset twice before an answer, a status, a cut
    stream)."""
    async with httpx.AsyncClient(timeout=30) as c:
        n = 0
        while not stop.is_set():
            n += 1
            stream = n % 2 == 0
            body = {"model": MODEL, "prompt": "a b c", "max_tokens": 8, "stream": stream}
            try:
                try:
                    r = await c.post(f"{url}/v1/completions", json=body)
                except RETRIED as exc:
                    retries.append(f"{type(exc).__name__}: {exc}")
                    r = await c.post(f"{url}/v1/completions", json=body)
            except httpx.HTTPError as exc:
                outcomes.append(f"{type(exc).__name__}: {exc}")
                continue
            if r.status_code != 200:
                outcomes.append(f"HTTP {r.status_code}: {r.text[:200]}")
            elif stream and not r.text.rstrip().endswith("data: [DONE]"):
                outcomes.append(f"cut stream: {r.text[-200:]!r}")
            else:
                outcomes.append("ok")


async def test_a_restarted_router_hands_over_without_losing_a_request(
    start_sim: Any, tmp_path: Path, server: str
) -> None:
    sim = await start_sim()
    port = _free_port()
    config = tmp_path / "router.yaml"
    config.write_text(f"backends: [{{url: '{sim.urls[0]}'}}]\npolicy: round_robin\ntokenizer: words\n")
    log = tmp_path / "router.log"
    url = f"http://127.0.0.1:{port}"
    old = await _router(config, port, server, log)
    new: asyncio.subprocess.Process | None = None
    stop, outcomes, retries = asyncio.Event(), list[str](), list[str]()
    try:
        async with asyncio.timeout(GUARD_S):  # guards against hanging, not measurements
            await _listening(old, port, log)
            client = asyncio.create_task(_client(url, stop, outcomes, retries))
            while len(outcomes) < 20:
                await asyncio.sleep(0.01)
            new = await _router(config, port, server, log)
            await _listening(new, port, log)
            old.send_signal(signal.SIGUSR1)
            assert await old.wait() == 0
            handed = len(outcomes)
            while len(outcomes) < handed + 20:  # the successor serves the same client on
                await asyncio.sleep(0.01)
            stop.set()
            await client
            async with httpx.AsyncClient(timeout=10) as c:
                served = parse_metrics((await c.get(f"{url}/metrics")).text)
    finally:
        for proc in (old, new):
            if proc is not None and proc.returncode is None:
                proc.kill()
                await proc.wait()
    assert [o for o in outcomes if o != "ok"] == []
    assert len(retries) <= 2, retries  # the hand-over's window, not a steady loss
    assert sum(s.value for s in served["infctl_router_requests_total"]) >= 20  # the successor's own count


async def _prober(url: str, stop: asyncio.Event, answers: list[str]) -> None:
    """GET /ready every 20 ms on one keep-alive connection, as the local supervisor's health probe does."""
    async with httpx.AsyncClient(timeout=10, limits=httpx.Limits(max_connections=1)) as c:
        while not stop.is_set():
            try:
                try:
                    r = await c.get(f"{url}/ready")
                except RETRIED:
                    r = await c.get(f"{url}/ready")
                answers.append(str(r.status_code))
            except httpx.HTTPError as exc:
                answers.append(f"{type(exc).__name__}: {exc}")
            await asyncio.sleep(0.02)


async def test_a_keep_alive_prober_does_not_hold_a_router_handing_over(
    start_sim: Any, tmp_path: Path, server: str
) -> None:
    """The old router leaves once its connections are closed, while a client keeps polling /ready on a
    kept-alive connection: every answer during the hand-over closes its connection (it used to hold the old
    router until its drain timeout; here that is 600 s, past the guard)."""
    sim = await start_sim()
    port = _free_port()
    config = tmp_path / "router.yaml"
    config.write_text(
        f"backends: [{{url: '{sim.urls[0]}'}}]\npolicy: round_robin\ntokenizer: words\ndrain_timeout_s: 600\n"
    )
    log = tmp_path / "router.log"
    url = f"http://127.0.0.1:{port}"
    old = await _router(config, port, server, log)
    new: asyncio.subprocess.Process | None = None
    stop, answers = asyncio.Event(), list[str]()
    try:
        async with asyncio.timeout(GUARD_S):  # guards against hanging, not measurements
            await _listening(old, port, log)
            prober = asyncio.create_task(_prober(url, stop, answers))
            while len(answers) < 5:
                await asyncio.sleep(0.01)
            new = await _router(config, port, server, log)
            await _listening(new, port, log)
            old.send_signal(signal.SIGUSR1)
            assert await old.wait() == 0
            assert not prober.done()  # it polled all along
            stop.set()
            await prober
    finally:
        for proc in (old, new):
            if proc is not None and proc.returncode is None:
                proc.kill()
                await proc.wait()
    assert set(answers) == {"200"}, answers
