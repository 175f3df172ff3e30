"""Routers side by side on the same simulated engines: quality (hit rate, TTFT, balance) and overhead.

    python benchmarks/bench_router.py [--requests 300] [--rate 16] [--peers-bin DIR] [--mooncake PATH]

One `infctl sim --instances 4` process (real time, Llama-3-8B/H100 timing, 32k tokens of KV per engine) serves
every run; before each run the engines' prefix caches are emptied, so each router starts from the same line.

1. Quality, shared-prefix workload (the demo's: 48 prefixes of 2k tokens, Zipf 0.6): infctl round_robin,
   infctl cache_aware, sglang-router cache_aware and vllm-router cache_aware (when installed: --peers-bin or
   PATH). Engine-side prefix-cache hit rate (from the engines' own counters), TTFT p50/p99, output tokens/s,
   and the busiest engine's prefill work over its fair share.
2. Optionally the Mooncake trace (--mooncake), time-compressed, through the same routers.
3. Overhead: 16-token streams at a fixed rate to one engine directly and through each router; the router's
   added TTFT and E2E at p50/p99 (the difference from the direct run measured in the same process).

Everything runs on this machine's two cores together (client, routers, engines), so absolute figures carry
that noise; the ratios within one run are the point.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from infctl.bench import (
    BenchConfig,
    BenchResult,
    LengthDist,
    LoadPlan,
    RandomSpec,
    Stage,
    TraceSpec,
    run_benchmark,
)
from infctl.bench.scenarios import prefix_scenario

MODEL = "m"
ENGINES = 4


def free_port(span: int = 1) -> int:
    """A port such that it and the next ``span - 1`` are free (the sim takes consecutive ports)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = int(s.getsockname()[1])
        if base + span < 65000 and all(_free(base + i) for i in range(1, span)):
            return base


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def wait_http(url: str, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args!r} exited with {proc.returncode}")
        try:
            if httpx.get(url, timeout=1.0).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not come up")


@dataclass
class Router:
    name: str
    argv: list[str]
    port: int
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_http(f"{self.url}/v1/models", self.proc)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def routers(
    engines: Sequence[str], peers_bin: Path | None, policies: Sequence[str], peers: bool
) -> list[Router]:
    py = [sys.executable, "-m", "infctl", "router", "--engine", "vllm"]
    backends = [a for u in engines for a in ("--backend", u)]
    out = []
    for policy in policies:
        port = free_port()
        label = policy if len(policy) < 20 else policy[:17] + "..."
        out.append(Router(f"infctl {label}", [*py, "--port", str(port), "--policy", policy, *backends], port))
    for name in ("sglang-router", "vllm-router") if peers else ():
        exe = str(peers_bin / name) if peers_bin and (peers_bin / name).exists() else shutil.which(name)
        if not exe:
            print(f"({name} not installed: skipped)")
            continue
        port = free_port()
        head = [exe, "launch"] if name == "sglang-router" else [exe]
        argv = [
            *head,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--policy",
            "cache_aware",
            "--worker-urls",
            *engines,
        ]
        out.append(Router(f"{name} cache_aware", argv, port))
    return out


async def reset(engines: Sequence[str]) -> None:
    async with httpx.AsyncClient(timeout=10) as c:
        for u in engines:
            await c.post(f"{u}/reset_prefix_cache")


async def bench(
    url: str, engines: Sequence[str], workload: object, load: LoadPlan, label: str
) -> BenchResult:
    await reset(engines)
    cfg = BenchConfig(
        url=url, model=MODEL, workload=workload, load=load, seed=1, engine_urls=list(engines), label=label
    )
    return await run_benchmark(cfg)


def balance(r: BenchResult) -> float:
    """Busiest engine's uncached prompt tokens over the fair share (1.0 = even)."""
    if r.server is None or not r.server.engines:
        return float("nan")
    work = [e.prompt_tokens - e.prefix_hits for e in r.server.engines]
    total = sum(work)
    return max(work) * len(work) / total if total else float("nan")


def quality_row(name: str, r: BenchResult) -> str:
    hit = r.server.hit_rate if r.server else None
    s = r.summary
    return (
        f"{name:26s} {('%.0f%%' % (hit * 100)) if hit is not None else 'n/a':>6s} "
        f"{s.ttft['p50'] * 1e3:8.0f} {s.ttft['p99'] * 1e3:8.0f} {s.output_throughput:9.0f} "
        f"{balance(r):8.2f} {s.failed:6d}"
    )


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--rate", type=float, default=16.0)
    ap.add_argument(
        "--peers-bin",
        type=Path,
        default=Path(os.environ["INFCTL_PEERS_BIN"]) if "INFCTL_PEERS_BIN" in os.environ else None,
    )
    ap.add_argument("--mooncake", type=Path, default=None)
    ap.add_argument("--mooncake-requests", type=int, default=400)
    ap.add_argument("--overhead-rate", type=float, default=40.0)
    ap.add_argument("--policy", action="append", help="infctl policies to run (preset or JSON); repeatable")
    ap.add_argument("--no-peers", action="store_true", help="skip sglang-router and vllm-router")
    ap.add_argument("--no-overhead", action="store_true")
    args = ap.parse_args()

    port = free_port(ENGINES)
    sim = subprocess.Popen(
        [sys.executable, "-m", "infctl", "sim", "--instances", str(ENGINES), "--port", str(port),
         "--model", MODEL, "--num-gpu-blocks", "2048", "--max-model-len", "32768"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    engines = [f"http://127.0.0.1:{port + i}" for i in range(ENGINES)]
    try:
        for u in engines:
            wait_http(f"{u}/health", sim)
        policies = args.policy or ["round_robin", "cache_aware"]
        rs = routers(engines, args.peers_bin, policies, not args.no_peers)
        shared = prefix_scenario(ENGINES).workload
        load = LoadPlan(stages=[Stage(rate=args.rate, num_requests=args.requests)], warmup=20)
        header = (
            f"{'router':26s} {'hit':>6s} {'TTFT p50':>8s} {'p99 ms':>8s} {'out tok/s':>9s} "
            f"{'max/fair':>8s} {'failed':>6s}"
        )
        sections: list[tuple[str, object, LoadPlan]] = [("shared prefixes", shared, load)]
        if args.mooncake:
            trace = TraceSpec(
                path=args.mooncake, time_compression=4.0, input_scale=0.25, max_input_tokens=16000
            )
            sections.append(
                (
                    "Mooncake trace (x4 faster, prompts x0.25)",
                    trace,
                    LoadPlan(stages=[Stage(num_requests=args.mooncake_requests)]),
                )
            )
        for title, workload, plan in sections:
            print(f"\n== {title}: {ENGINES} engines ==\n{header}")
            for r in rs:
                r.start()
                try:
                    res = await bench(r.url, engines, workload, plan, r.name)
                finally:
                    r.stop()
                print(quality_row(r.name, res), flush=True)

        if args.no_overhead:
            return
        print(f"\n== overhead: 16-token streams at {args.overhead_rate:g} req/s, one engine ==")
        small = RandomSpec(input=LengthDist(mean=32), output=LengthDist(mean=16))
        fixed = LoadPlan(
            stages=[Stage(rate=args.overhead_rate, num_requests=int(args.overhead_rate * 10))], warmup=20
        )
        direct = await bench(engines[0], engines[:1], small, fixed, "direct")
        d_ttft, d_e2e = direct.summary.ttft, direct.summary.e2e
        print(f"{'direct':26s} TTFT p50 {d_ttft['p50'] * 1e3:6.2f} ms p99 {d_ttft['p99'] * 1e3:6.2f} ms")
        for r in routers(engines[:1], args.peers_bin, ["round_robin"], not args.no_peers):
            r.start()
            try:
                res = await bench(r.url, engines[:1], small, fixed, r.name)
            finally:
                r.stop()
            t, e = res.summary.ttft, res.summary.e2e
            print(
                f"{r.name:26s} added TTFT p50 {(t['p50'] - d_ttft['p50']) * 1e3:+6.2f} ms "
                f"p99 {(t['p99'] - d_ttft['p99']) * 1e3:+7.2f} ms; "
                f"added E2E p50 {(e['p50'] - d_e2e['p50']) * 1e3:+6.2f} ms"
            )
    finally:
        sim.terminate()
        sim.wait(10)


if __name__ == "__main__":
    asyncio.run(main())
