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

Printed: requests sent; failed before streaming (an error, a non-200, or an in-band error event before the
first token: the goal is 0); duplicated (more tokens than asked, two finish reasons, or chunks of two
response ids: the goal is 0); ended with an error event (after some tokens); cut after streaming began (the
body broke off, or ended without ``[DONE]``); short (a clean end with fewer tokens than asked: silent
truncation); when the killed engine was back (restarted by the supervisor and healthy) and the requests each
backend was sent between the kill and the router restart (the engine back in rotation); the router's count
of streams broken by the kill and how each ended (``broken_streams_total``); when the successor router
served and when the old one had left; the router's RSS per incarnation, sampled every 5 s: first, last,
max, the growth over each incarnation's second half (after warm-up) and one sample a minute (goal: flat).
Everything (client, router, engines) shares this machine's cores: the capacity is this machine's, not a
property of infctl.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
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
    text, ids, usage, errors, finishes, done = "", set(), None, 0, 0, False
    try:
        async with c.stream("POST", f"{url}/v1/completions", json=body) as r:
            if r.status_code != 200:
                await r.aread()
                return f"failed before streaming: HTTP {r.status_code}"
            async for line in r.aiter_lines():
                if not line.startswith("data: "):
                    continue
                data = line[6:]
                if data == "[DONE]":
                    done = True
                    break
                chunk = json.loads(data)
                if "error" in chunk:
                    errors += 1
                    continue
                ids.add(chunk.get("id"))
                for choice in chunk.get("choices") or ():
                    text += choice.get("text") or ""
                    finishes += choice.get("finish_reason") is not None
                usage = chunk.get("usage") or usage
    except (httpx.HTTPError, json.JSONDecodeError) as exc:
        return "cut after streaming began" if text else f"failed before streaming: {type(exc).__name__}"
    tokens = len(text.split())
    if tokens > max_tokens or len(ids) > 1 or finishes > 1:
        return "duplicated"
    if usage and usage["completion_tokens"] > max_tokens:
        return "duplicated"
    if errors:
        return "ended with an error event" if text else "failed before streaming: error event"
    if not done:
        return "cut after streaming began" if text else "failed before streaming: no [DONE]"
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


async def _counts(c: httpx.AsyncClient, url: str) -> dict[str, dict[str, float]]:
    """The router's counters this soak reports: requests per backend (every status), ejections and
    re-admissions per backend, broken streams by outcome, migrations, error events by reason."""
    metrics = parse_metrics((await c.get(f"{url}/metrics")).text)
    wanted = {
        "requests": ("requests_total", "backend"),
        "ejections": ("ejections_total", "backend"),
        "readmissions": ("readmissions_total", "backend"),
        "broken": ("broken_streams_total", "outcome"),
        "migrations": ("stream_migrations_total", ""),
        "error events": ("stream_error_events_total", "reason"),
    }
    out: dict[str, dict[str, float]] = {}
    for key, (name, label) in wanted.items():
        into = out.setdefault(key, {})
        for sample in metrics.get(f"infctl_router_{name}", []):
            at = sample.labels.get(label, "all") if label else "all"
            into[at] = into.get(at, 0.0) + sample.value
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


@dataclass
class Events:
    """What happened when, in seconds from the soak's start."""

    killed: tuple[float, int] | None = None
    """(when, the engine's pid)."""
    back: tuple[float, int] | None = None
    """(when the supervisor's record showed the engine healthy again, its new pid)."""
    restart: tuple[float, float, str] | None = None
    """(when asked, seconds until the supervisor answered: the old router gone, its answer)."""
    successor: tuple[float, int] | None = None
    """(seconds from the ask until the successor served, its pid)."""
    at_kill: dict[str, dict[str, float]] = field(default_factory=dict)
    at_restart: dict[str, dict[str, float]] = field(default_factory=dict)
    rss: dict[int, list[tuple[float, float]]] = field(default_factory=dict)
    """Router pid -> (seconds, MiB) samples."""


async def _engine_back(plan: LocalPlan, name: str, killed: int, since: float, events: Events) -> None:
    loop = asyncio.get_running_loop()
    while True:
        state = read_state(plan.run_dir, RELEASE)
        proc = state.process(name) if state else None
        if proc is not None and proc.pid not in (None, killed) and proc.status == "healthy":
            events.back = (loop.time() - since, proc.pid)
            return
        await asyncio.sleep(0.2)


async def _restart(c: httpx.AsyncClient, plan: LocalPlan, control: int, events: Events) -> None:
    """Ask the supervisor to restart the router; it answers once the old router has handed over and
    exited. Meanwhile its record names the successor as soon as the successor listens and answers: that
    moment, from the ask, is the successor's exec-to-serving under this load (``events.successor``)."""
    loop = asyncio.get_running_loop()
    asked = loop.time()
    state = read_state(plan.run_dir, RELEASE)
    old = state.process("router").pid if state else None
    answer = asyncio.create_task(c.post(f"http://127.0.0.1:{control}/restart/router", timeout=180))
    while not answer.done():
        state = read_state(plan.run_dir, RELEASE)
        pid = state.process("router").pid if state else None
        if events.successor is None and pid not in (None, old):
            events.successor = (loop.time() - asked, pid)
        await asyncio.wait({answer}, timeout=0.05)
    got = answer.result()
    assert events.restart is not None
    events.restart = (events.restart[0], loop.time() - asked, f"HTTP {got.status_code} {got.text[:120]}")


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
    tally, rng, events = Tally(), random.Random(18), Events()
    start = loop.time()
    kill_at, restart_at = start + 0.3 * seconds, start + 0.6 * seconds
    helpers: list[asyncio.Task[None]] = []
    next_rss, n, at = start, 0, start

    async def one(i: int) -> None:
        tally.outcomes[await _stream(c, url, max_tokens, i)] += 1

    while (now := loop.time()) < start + seconds:
        if now >= next_rss:
            _sample_rss(plan, now - start, events)
            next_rss = now + 5.0
        if events.killed is None and now >= kill_at:
            state = read_state(plan.run_dir, RELEASE)
            pid = state.process("engine-0").pid if state else None
            if pid is not None:
                events.at_kill = await _counts(c, url)
                os.killpg(pid, signal.SIGKILL)
                events.killed = (loop.time() - start, pid)
                print(
                    f"t={now - start:.0f}s killed engine-0 (pid {pid}); the supervisor restarts it",
                    flush=True,
                )
                helpers.append(asyncio.create_task(_engine_back(plan, "engine-0", pid, start, events)))
        if events.restart is None and now >= restart_at:
            events.at_restart = await _counts(c, url)
            events.restart = (now - start, 0.0, "(no answer yet)")
            helpers.append(asyncio.create_task(_restart(c, plan, control, events)))
            print(f"t={now - start:.0f}s restarting the router (hand-over)", flush=True)
        at += rng.expovariate(rate)
        if at > now:
            await asyncio.sleep(at - now)
        n += 1
        task = asyncio.create_task(one(n))
        tally.inflight.add(task)
        task.add_done_callback(tally.inflight.discard)
    await asyncio.gather(*tally.inflight)
    for helper in helpers:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(helper, 60)
    _sample_rss(plan, loop.time() - start, events)
    state = read_state(plan.run_dir, RELEASE)
    if state is not None:
        for p in state.processes:
            print(f"  {p.name}: {p.status}, restarts {p.restarts}")
    _report(tally, n, events, _engine_ids(plan))


def _sample_rss(plan: LocalPlan, at: float, events: Events) -> None:
    state = read_state(plan.run_dir, RELEASE)
    pid = state.process("router").pid if state else None
    if pid is not None and (mib := _rss_mib(pid)) is not None:
        events.rss.setdefault(pid, []).append((at, mib))


def _engine_ids(plan: LocalPlan) -> dict[str, str]:
    """Process name -> the port its backend id carries."""
    return {s.name: str(s.port) for s in plan.specs if s.kind == "engine"}


def _report(tally: Tally, sent: int, events: Events, engines: dict[str, str]) -> None:
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
    if events.killed is not None:
        killed_at = events.killed[0]
        back = "never back healthy"
        if events.back is not None:
            at, pid = events.back
            back = f"back healthy at t={at:.0f}s (pid {pid}, {at - killed_at:.1f} s after the kill)"
        print(f"engine-0 killed at t={killed_at:.0f}s, {back}")
    if events.at_kill and events.at_restart:
        for name, port in engines.items():
            sent_to = _per_engine(events.at_restart["requests"], port) - _per_engine(
                events.at_kill["requests"], port
            )
            ejected = _per_engine(events.at_restart["ejections"], port)
            readmitted = _per_engine(events.at_restart["readmissions"], port)
            print(
                f"  {name}: {sent_to:g} requests between the kill and the router restart; "
                f"ejected {ejected:g}, re-admitted {readmitted:g}"
            )
        broken = events.at_restart["broken"]
        kinds = ", ".join(f"{k} {v:g}" for k, v in sorted(broken.items())) or "none"
        print(f"streams broken by the engine kill (router, before its restart): {kinds}")
        migrations = events.at_restart["migrations"].get("all", 0)
        errors = ", ".join(f"{k} {v:g}" for k, v in sorted(events.at_restart["error events"].items()))
        print(f"  continuations sent: {migrations:g}; error events: {errors or 'none'}")
    if events.restart is not None:
        asked, took, answer = events.restart
        served = "never"
        if events.successor is not None:
            served = f"{events.successor[0]:.1f} s (pid {events.successor[1]})"
        print(
            f"router restart asked at t={asked:.0f}s: the successor serving after {served}, the old router "
            f"gone and the supervisor's answer after {took:.1f} s: {answer}"
        )
    for i, (pid, samples) in enumerate(events.rss.items()):
        first, last = samples[0][1], samples[-1][1]
        half = [mib for at, mib in samples if at >= (samples[0][0] + samples[-1][0]) / 2]
        minutes = " ".join(f"{_first_after(samples, m * 60.0):.1f}" for m in _whole_minutes(samples))
        print(
            f"router RSS, incarnation {i + 1} (pid {pid}): {first:.1f} -> {last:.1f} MiB "
            f"({last - first:+.1f} MiB over {len(samples)} samples 5 s apart, max "
            f"{max(mib for _, mib in samples):.1f}; second half {half[-1] - half[0]:+.1f} MiB); "
            f"a minute apart: {minutes}"
        )


def _whole_minutes(samples: list[tuple[float, float]]) -> range:
    return range(int(samples[0][0] // 60) + (samples[0][0] % 60 > 0), int(samples[-1][0] // 60) + 1)


def _first_after(samples: list[tuple[float, float]], at: float) -> float:
    return next(mib for t, mib in samples if t >= at)


def _per_engine(values: dict[str, float], port: str) -> float:
    return sum(v for backend, v in values.items() if backend.endswith(f":{port}"))


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
