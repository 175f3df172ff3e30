"""CPU cost of the simulated engine per streamed token, at --stream-interval 1 versus 8.

Runs ``infctl sim --instances 8`` (llama3-8b-h100, real time) as a subprocess, keeps N streaming requests in
flight on every instance for a fixed wall time, and reads the server process's CPU time (user + system,
from /proc/<pid>/stat) before and after. The client runs in this process and reads raw bytes only, so its
own cost stays out of the server's figure.

    python benchmarks/bench_sim_cost.py [--seconds 8] [--streams 4]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import time

import httpx

INSTANCES = 8


def free_base_port(n: int) -> int:
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = int(s.getsockname()[1])
        try:
            socks = [socket.socket() for _ in range(n)]
            for i, sock in enumerate(socks):
                sock.bind(("127.0.0.1", base + i))
            return base
        except OSError:
            continue
        finally:
            for sock in socks:
                sock.close()
    raise RuntimeError("no free ports")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def wait_healthy(urls: list[str]) -> None:
    async with httpx.AsyncClient(timeout=1) as client:
        for _ in range(300):
            try:
                statuses = [(await client.get(f"{u}/health")).status_code for u in urls]
                if all(code == 200 for code in statuses):
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.1)
    raise RuntimeError("the simulator did not become healthy")


async def stream_forever(client: httpx.AsyncClient, url: str, deadline: float, counts: list[int]) -> None:
    body = {
        "prompt": "a b c d e f g h",
        "max_tokens": 200,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    while time.monotonic() < deadline:
        last = b""
        async with client.stream("POST", f"{url}/v1/completions", json=body) as resp:
            async for chunk in resp.aiter_bytes():
                last = (last + chunk)[-1000:]
        # The usage chunk is the event before "data: [DONE]".
        usage = last.split(b"\n\n")[-3].removeprefix(b"data: ")
        counts.append(json.loads(usage)["usage"]["completion_tokens"])


async def measure(interval: int, seconds: float, streams: int) -> tuple[float, int, float]:
    base = free_base_port(INSTANCES)
    cmd = [sys.executable, "-m", "infctl", "sim", "--port", str(base), "--instances", str(INSTANCES),
           "--stream-interval", str(interval), "--time-scale", "1.0"]  # fmt: skip
    proc = await asyncio.create_subprocess_exec(*cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    urls = [f"http://127.0.0.1:{base + i}" for i in range(INSTANCES)]
    try:
        await wait_healthy(urls)
        counts: list[int] = []
        limits = httpx.Limits(max_connections=INSTANCES * streams * 2)
        async with httpx.AsyncClient(timeout=60, limits=limits) as client:
            cpu0, wall0 = cpu_seconds(proc.pid), time.monotonic()
            deadline = wall0 + seconds
            await asyncio.gather(
                *(stream_forever(client, u, deadline, counts) for u in urls for _ in range(streams))
            )
            cpu, wall = cpu_seconds(proc.pid) - cpu0, time.monotonic() - wall0
        return cpu, sum(counts), wall
    finally:
        proc.terminate()
        await proc.wait()


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=8.0, help="load duration per run (wall seconds)")
    parser.add_argument("--streams", type=int, default=4, help="concurrent streams per instance")
    args = parser.parse_args()
    print(f"{INSTANCES} instances, {args.streams} concurrent streams each, {args.seconds:g} s per run")
    print(f"{'interval':>8} {'tokens':>8} {'tok/s':>8} {'server CPU s':>12} {'CPU us/token':>12}")
    per_token: dict[int, float] = {}
    for interval in (1, 8):
        cpu, tokens, wall = await measure(interval, args.seconds, args.streams)
        per_token[interval] = cpu / tokens
        print(
            f"{interval:>8} {tokens:>8} {tokens / wall:>8.0f} {cpu:>12.2f} {per_token[interval] * 1e6:>12.1f}"
        )
    print(f"CPU per token, interval 1 / interval 8: {per_token[1] / per_token[8]:.2f}x")


if __name__ == "__main__":
    from saved import save_if_asked  # benchmarks/saved.py

    save_if_asked()  # --save PATH: this run's output, command, date and commit as a result record
    asyncio.run(main())
