"""Soak: minutes of streaming at ~70% of the local stack's capacity, with one engine killed mid-run (the
supervisor restarts it) and the router restarted once (the supervisor's hand-over), as issue 18 asks.

    flock /tmp/infctl-bench.lock python benchmarks/bench_soak.py [--minutes 10] [--engines 2]
                                                                [--max-tokens 64] [--load 0.7]

The stack is a local release run by ``infctl.local.supervisor`` in this process: ``--engines`` simulated vLLM
engines (``infctl sim``, real time, one process each) and ``infctl router`` (cache_aware, the simulator's
words as tokenizer), each its own process. First a calibration: a closed loop of 48 concurrent streams for
15 s measures the stack's capacity (completed streams per second); the soak then sends streaming
completions as a Poisson process at ``--load`` times that rate. At 30% of the soak engine-0's process group
is SIGKILLed (streams on it break mid-way; the router continues them on another engine or ends them with an
error event); at 60% the router is restarted through the supervisor's control endpoint (``POST
/restart/router``: the successor starts on the same port, then the old router hands over and drains).

Printed: requests sent; failed before streaming (an error or non-200 before the first event: the goal is 0);
duplicated (more tokens than asked, or chunks of two response ids: the goal is 0); ended with an error event;
cut after streaming began; short (a clean end with fewer tokens than asked: silent truncation); the
router's count of streams broken by the kill and how each ended (``broken_streams_total``); the router's
RSS per incarnation from its first to its last sample (goal: flat). Everything (client, router, engines)
shares this machine's cores: the capacity is this machine's, not a property of infctl.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from infctl.local import LocalPlan, PortAllocator, ProcessSpec, SupervisorSettings, port_is_free, serve
from infctl.local.state import read_state
from infctl.telemetry.prometheus import parse_metrics

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
RELEASE = "soak"
SETTINGS = SupervisorSettings(health_timeout=120, health_interval=0.1, grace_period=10, backoff_initial=0.5)
CALIBRATE_S = 15.0
CALIBRATE_CONCURRENCY = 48


@dataclass
class Tally:
    outcomes: Counter[str] = field(default_factory=Counter)
    inflight: set[asyncio.Task[None]] = field(default_factory=set)


def _plan(run_dir: Path, engines: int) -> tuple[LocalPlan, ProcessSpec, int]:
    ports = PortAllocator(30500 + os.getpid() % 3000, port_is_free)
    specs: list[ProcessSpec] = []
    for i in range(engines):
        port = ports.take()
        argv = (sys.executable, "-m", "infctl", "sim", "--port", str(port), "--model", MODEL)
        specs.append(ProcessSpec(name=f"engine-{i}", kind="engine", argv=argv, port=port))
    port, control = ports.take(), ports.take()
    config = run_dir / "router.yaml"
    backends = ", ".join(f"{{url: '{s.url}'}}" for s in specs)
    config.write_text(f"backends: [{backends}]\npolicy: cache_aware\ntokenizer: words\n")
    argv = (sys.executable, "-m", "infctl", "router", "-f", str(config), "--port", str(port))
    router = ProcessSpec(name="router", kind="router", argv=argv, port=port, health_path="/ready")
    plan = LocalPlan(
        release=RELEASE, run_dir=run_dir, model=MODEL, specs=(*specs, router), control_port=control
    )
    return plan, router, control


async def _stream(c: httpx.AsyncClient, url: str, max_tokens: int, n: int) -> str:
    """One streamed completion; its outcome (see the module docstring)."""
    body = {
        "model": MODEL,
        "prompt": f"request {n} " + " ".join(f"w{(n * 7 + i) % 997}" for i in range(32)),
        "max_tokens": max_tokens,
        "seed": n,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    started, text, ids, usage, error = False, "", set(), None, False
    try:
        async with c.stream("POST", f"{url}/v1/completions", json=body) as r:
            if r.status_code != 200:
                await r.aread()
                return f"failed before streaming: HTTP {r.status_code}"
            async for line in r.aiter_lines():
                if not line.startswith("data: "):
                    continue
                started = True
                data = line[6:]
                if data == "[DONE]":
                    break
                chunk = json.loads(data)
                if "error" in chunk:
                    error = True
                    continue
                ids.add(chunk.get("id"))
                text += "".join(ch.get("text") or "" for ch in chunk.get("choices") or ())
                usage = chunk.get("usage") or usage
    except (httpx.HTTPError, json.JSONDecodeError) as exc:
        return "cut after streaming began" if started else f"failed before streaming: {type(exc).__name__}"
    tokens = len(text.split())
    if tokens > max_tokens or len(ids) > 1 or (usage and usage["completion_tokens"] > max_tokens):
        return "duplicated"
    if error:
        return "ended with an error event"
    if tokens < max_tokens:
        return "short (clean end, tokens missing)"
    return "ok"


async def _calibrate(c: httpx.AsyncClient, url: str, max_tokens: int) -> float:
    """Completed streams per second of a closed loop at ``CALIBRATE_CONCURRENCY``."""
    loop = asyncio.get_running_loop()
    end = loop.time() + CALIBRATE_S
    done = 0

    async def worker(w: int) -> None:
        nonlocal done
        n = w
        while loop.time() < end:
            if await _stream(c, url, max_tokens, 10_000_000 + n) == "ok":
                done += 1
            n += CALIBRATE_CONCURRENCY

    await asyncio.gather(*(worker(w) for w in range(CALIBRATE_CONCURRENCY)))
    return done / CALIBRATE_S


def _rss_mib(pid: int | None) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        return None
    return None


async def _broken(c: httpx.AsyncClient, url: str) -> dict[str, float]:
    metrics = parse_metrics((await c.get(f"{url}/metrics")).text)
    out = {s.labels["outcome"]: s.value for s in metrics.get("infctl_router_broken_streams_total", [])}
    for s in metrics.get("infctl_router_stream_migrations_total", []):
        out["migrations sent"] = s.value
    return out


async def soak(minutes: float, engines: int, max_tokens: int, load: float) -> None:
    run_dir = Path(tempfile.mkdtemp(prefix="infctl-soak-"))
    plan, router, control = _plan(run_dir, engines)
    ready, stop = asyncio.Event(), asyncio.Event()
    supervisor = asyncio.create_task(serve(plan, SETTINGS, ready=ready, stop=stop))
    await asyncio.wait({supervisor, asyncio.ensure_future(ready.wait())}, return_when=asyncio.FIRST_COMPLETED)
    if supervisor.done():
        supervisor.result()
    url, loop = router.url, asyncio.get_running_loop()
    limits = httpx.Limits(max_connections=1000, max_keepalive_connections=200)
    try:
        async with httpx.AsyncClient(timeout=120, limits=limits) as c:
            capacity = await _calibrate(c, url, max_tokens)
            rate = capacity * load
            print(
                f"capacity {capacity:.1f} streams/s ({max_tokens} tokens each); soak at {rate:.1f}/s",
                flush=True,
            )
            await _run(c, plan, url, control, rate, minutes * 60, max_tokens, loop)
    finally:
        stop.set()
        await supervisor


async def _run(
    c: httpx.AsyncClient,
    plan: LocalPlan,
    url: str,
    control: int,
    rate: float,
    seconds: float,
    max_tokens: int,
    loop: asyncio.AbstractEventLoop,
) -> None:
    tally, rng = Tally(), random.Random(18)
    start = loop.time()
    kill_at, restart_at = start + 0.3 * seconds, start + 0.6 * seconds
    rss: dict[int, list[float]] = {}
    killed = restarted = False
    broken_before_restart: dict[str, float] = {}
    restart_task: asyncio.Task[httpx.Response] | None = None
    next_rss, n, at = start, 0, start

    async def one(i: int) -> None:
        tally.outcomes[await _stream(c, url, max_tokens, i)] += 1

    while (now := loop.time()) < start + seconds:
        if now >= next_rss:
            state = read_state(plan.run_dir, RELEASE)
            pid = state.process("router").pid if state else None
            if pid is not None and (mib := _rss_mib(pid)) is not None:
                rss.setdefault(pid, []).append(mib)
            next_rss = now + 5.0
        if not killed and now >= kill_at:
            state = read_state(plan.run_dir, RELEASE)
            pid = state.process("engine-0").pid if state else None
            if pid is not None:
                os.killpg(pid, signal.SIGKILL)
                print(
                    f"t={now - start:.0f}s killed engine-0 (pid {pid}); the supervisor restarts it",
                    flush=True,
                )
            killed = True
        if not restarted and now >= restart_at:
            broken_before_restart = await _broken(c, url)
            restart_task = asyncio.create_task(
                c.post(f"http://127.0.0.1:{control}/restart/router", timeout=180)
            )
            print(f"t={now - start:.0f}s restarting the router (hand-over)", flush=True)
            restarted = True
        at += rng.expovariate(rate)
        if at > now:
            await asyncio.sleep(at - now)
        n += 1
        task = asyncio.create_task(one(n))
        tally.inflight.add(task)
        task.add_done_callback(tally.inflight.discard)
    await asyncio.gather(*tally.inflight)
    if restart_task is not None:
        answer = await restart_task
        print(f"router restart: HTTP {answer.status_code} {answer.text[:120]}")
    state = read_state(plan.run_dir, RELEASE)
    if state is not None:
        for p in state.processes:
            print(f"  {p.name}: {p.status}, restarts {p.restarts}")
        pid = state.process("router").pid
        if pid is not None and (mib := _rss_mib(pid)) is not None:
            rss.setdefault(pid, []).append(mib)
    _report(tally, n, broken_before_restart, rss)


def _report(tally: Tally, sent: int, broken: dict[str, float], rss: dict[int, list[float]]) -> None:
    failed = sum(v for k, v in tally.outcomes.items() if k.startswith("failed before streaming"))
    print(f"\nrequests sent: {sent}")
    print(f"failed before streaming:   {failed}  (goal 0)")
    print(f"duplicated:                {tally.outcomes['duplicated']}  (goal 0)")
    print(f"ended with an error event: {tally.outcomes['ended with an error event']}")
    print(f"cut after streaming began: {tally.outcomes['cut after streaming began']}")
    print(f"short (silent truncation): {tally.outcomes['short (clean end, tokens missing)']}  (goal 0)")
    print(f"ok:                        {tally.outcomes['ok']}")
    for k, v in sorted(tally.outcomes.items()):
        if k.startswith("failed before streaming"):
            print(f"  {k}: {v}")
    kinds = ", ".join(f"{k} {v:g}" for k, v in sorted(broken.items())) or "none"
    print(f"streams broken by the engine kill (router, before its restart): {kinds}")
    for i, (pid, samples) in enumerate(rss.items()):
        growth = samples[-1] - samples[0]
        print(
            f"router RSS, incarnation {i + 1} (pid {pid}): {samples[0]:.1f} -> {samples[-1]:.1f} MiB "
            f"({growth:+.1f} MiB over {len(samples)} samples 5 s apart; max {max(samples):.1f})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--engines", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--load", type=float, default=0.7, help="fraction of the measured capacity")
    args = parser.parse_args()
    started = time.time()
    asyncio.run(soak(args.minutes, args.engines, args.max_tokens, args.load))
    print(f"\n({time.time() - started:.0f} s wall, soak {args.minutes:g} min)")


if __name__ == "__main__":
    from saved import save_if_asked  # benchmarks/saved.py

    save_if_asked()  # --save PATH: this run's output, command, date and commit as a result record
    main()
