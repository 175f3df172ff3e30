"""Length pools on the local target: short-request TTFT with the profile's pools vs its engines as one pool.

Starts ``profiles/local-length-pools.yaml`` (3 simulated engines in the ``short`` pool, 1 in ``long``, each
timed like Llama-3-8B on an H100, in real time) with its router, exactly as ``infctl deploy --target local``
would, and runs the seed's mixed workload (90% chats of ~256 tokens, 10% documents of ~7,000, Poisson
arrivals) twice through the same router, caches emptied in between:

* ``one pool``: least-load routing over all four engines, no buckets (the engines keep their pool labels,
  which nothing reads);
* ``length pools``: least-load routing with the buckets the profile gives the router (one per pool).

Prints both arms side by side (short TTFT p50/p99, all-request TTFT p99, failures) and the change in short
TTFT p99, against the issue's bar (at least 80% lower) and the seed's -91%.

    flock /tmp/infctl-bench.lock python benchmarks/bench_length_pools.py [--requests 240] [--rate 16]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from infctl.bench.metrics import summarize
from infctl.bench.result import BenchResult
from infctl.bench.scenarios import SHORT_MAX_TOKENS, bucketing_scenario, run_scenario, scenario_rows
from infctl.config import load_deployment
from infctl.local import SupervisorSettings, build_plan, port_is_free, serve
from infctl.local.admin_token import token_path

ROOT = Path(__file__).resolve().parents[1]
PROFILE = ROOT / "profiles" / "local-length-pools.yaml"
BAR = -0.80
"""The issue's bar: short TTFT p99 at least 80% lower with length pools."""


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-pools-") as run_dir:
        overrides = [
            f"local.base_port={args.base_port}",
            f"router.port={args.base_port + 90}",
            f"local.run_dir={run_dir}",
        ]
        profile = load_deployment(args.profile, overrides)
        plan = build_plan(profile, is_free=port_is_free)
        engines = [s for s in plan.specs if s.kind == "engine"]
        print(f"profile {args.profile.name}: " + ", ".join(f"{s.name} ({s.pool})" for s in engines))
        ready, stop = asyncio.Event(), asyncio.Event()
        settings = SupervisorSettings(health_timeout=120, grace_period=5)
        supervisor = asyncio.create_task(serve(plan, settings, ready=ready, stop=stop))
        try:
            await asyncio.wait_for(ready.wait(), 180)
            scenario = bucketing_scenario(
                len(engines), requests=args.requests, rate=args.rate, buckets=plan.buckets
            )
            started = time.monotonic()
            res = await run_scenario(
                scenario,
                router_url=plan.entrypoint.url,
                engine_urls=[s.url for s in engines],
                model=plan.model,
                admin_token=token_path(plan).read_text().strip(),
                pools=[s.pool for s in engines],
                progress=print,
            )
        finally:
            stop.set()
            await asyncio.gather(supervisor, return_exceptions=True)
    rows = scenario_rows(res)
    print(f"\n{args.requests} requests per arm at {args.rate:g}/s ({time.monotonic() - started:.0f} s)")
    print(f"{'measure':<26}{'one pool':>12}{'length pools':>14}{'change':>9}  seed")
    for name, a, b, change, seed in rows:
        print(f"{name:<26}{a:>12}{b:>14}{change:>9}  {seed}")
    short = {r[0]: r for r in rows}["short TTFT p99"]
    base, pools = _short_p99(res.baseline), _short_p99(res.infctl)
    change = (pools - base) / base
    verdict = "meets" if change <= BAR else "misses"
    print(f"\nshort TTFT p99 {short[1]} -> {short[2]}: {change:+.0%} ({verdict} the bar of {BAR:+.0%})")


def _short_p99(result: BenchResult) -> float:
    """TTFT p99 of the prompts the scenario counts as short (what its "short TTFT p99" row shows)."""
    short = summarize([r for r in result.requests if r.input_tokens <= SHORT_MAX_TOKENS])
    return short.ttft["p99"]


if __name__ == "__main__":
    from saved import save_if_asked  # benchmarks/saved.py

    save_if_asked()  # --save PATH: this run's output, command, date and commit as a result record
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--profile", type=Path, default=PROFILE)
    parser.add_argument("--requests", type=int, default=240)
    parser.add_argument("--rate", type=float, default=16.0)
    parser.add_argument("--base-port", type=int, default=23100)
    asyncio.run(main(parser.parse_args()))
