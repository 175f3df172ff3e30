"""CPU cost of routing one request, this checkout against another revision, side by side in one run.

    python benchmarks/bench_route_cost.py [--against REV] [--rounds 5]

Measures, in microseconds per request (the minimum over rounds; the two code versions alternate, each in
its own fresh process, so this shared machine's noise lands on both):

- ``token_ids`` / ``block_hashes`` / ``from_ids`` on chat-sized prompts (256 tokens), on the demo's shared
  prefixes (2k shared + 64 own tokens, 48 prefixes) and on the Mooncake trace's prompts (x0.25, ~1-4k tokens,
  in trace order, so its block reuse is what the router would see);
- ``RouterCore.route`` with ``cache_aware`` (and ``index: auto``) over 4 and 8 backends with loaded engine
  signals, after a warm-up that fills the approximate index to capacity (evictions included).

``--against`` (default: HEAD) is exported with ``git archive`` into a temporary directory and imported from
there; the working tree is imported from this checkout.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from itertools import islice
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MOONCAKE = ROOT.parent / "shared" / "data" / "mooncake_synthetic_trace.jsonl"


def _us(started: float, calls: int) -> float:
    """Microseconds per call since ``started`` (``time.perf_counter``)."""
    return (time.perf_counter() - started) / calls * 1e6


def measure() -> dict[str, float]:
    """Every measure once, with whatever ``infctl`` this process imports."""
    from infctl.bench.workloads import build_workload
    from infctl.bench.workloads.specs import TraceSpec
    from infctl.router import Backend, RequestInfo, build_policy
    from infctl.router.core import RouterCore
    from infctl.tokens import block_hashes, synth_words, token_ids

    rng = random.Random(1)
    chats = [synth_words(256, 10_000 + i) for i in range(400)]
    prefixes = [synth_words(2048, i) for i in range(48)]
    shared = [f"{rng.choice(prefixes)} {synth_words(64, 1000 + i)}" for i in range(400)]
    out: dict[str, float] = {}
    if MOONCAKE.exists():
        spec = TraceSpec(path=MOONCAKE, input_scale=0.25, max_input_tokens=16000)
        reqs = islice(build_workload(spec, "completions", seed=1).requests(), 400)
        mooncake = [r.prompt or "" for r in reqs]
    else:
        mooncake = []
    for name, texts in (("chat 256", chats), ("shared 2k+64", shared), ("mooncake", mooncake)):
        if not texts:
            continue
        started = time.perf_counter()
        ids = [token_ids(t) for t in texts]
        out[f"token_ids, {name}"] = _us(started, len(texts))
        # A fresh process: the first pass over these prompts is what a router sees (reuse across prompts
        # only); the second pass, through from_ids, finds every run memoised.
        started = time.perf_counter()
        for x in ids:
            block_hashes(x, 16, "m")
        out[f"block_hashes, {name}"] = _us(started, len(ids))
        started = time.perf_counter()
        for x in ids:
            RequestInfo.from_ids("r", x, model="m")
        out[f"from_ids, {name} (again)"] = _us(started, len(ids))
    infos = [RequestInfo.from_ids(f"r{i}", token_ids(t), model="m") for i, t in enumerate(shared * 3)]
    auto = {"preset": "cache_aware", "index": "auto"}
    for n in (4, 8):
        backends = tuple(Backend(f"http://10.0.0.{i}:8000") for i in range(n))
        snaps = [_snapshot(backends, rng, i * 0.01) for i in range(600)]
        for label, policy in (("cache_aware", "cache_aware"), ("cache_aware auto", auto)):
            core = RouterCore(build_policy(policy))
            for s, r in zip(snaps, infos[:600], strict=True):  # warm-up: the index at capacity
                core.route(s, r)
            started = time.perf_counter()
            for s, r in zip(snaps, infos[600:1200], strict=True):
                core.route(s, r)
            out[f"route, {label}, {n} backends"] = _us(started, 600)
    return out


def _snapshot(backends: Any, rng: random.Random, now: float) -> Any:
    from infctl.router import BackendState, Snapshot
    from infctl.telemetry.signals import EngineSignals

    states = {}
    for b in backends:
        sig = EngineSignals(
            queue=rng.randint(0, 2),
            running=rng.randint(0, 8),
            kv_usage=rng.random() * 0.7,
            cache_capacity_tokens=32768,
            block_size=16,
        )
        states[b.id] = BackendState(sig, 0.05, rng.randint(0, 8), rng.random() * 2000, rng.random() * 8000)
    return Snapshot(backends, states, now)


def _run(pythonpath: Path) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    done = subprocess.run(
        [sys.executable, __file__, "--measure-only"], env=env, capture_output=True, text=True, check=True
    )
    result: dict[str, float] = json.loads(done.stdout)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--against", default="HEAD", help="git revision to compare with (default: HEAD)")
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds per version (minimum kept)")
    ap.add_argument("--measure-only", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--output", choices=["text", "json"], default="text")
    args = ap.parse_args()
    if args.measure_only:
        print(json.dumps(measure()))
        return
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", args.against], capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
        best: dict[str, dict[str, float]] = {"before": {}, "after": {}}
        for _ in range(args.rounds):
            for version, path in (("before", Path(tmp)), ("after", ROOT)):
                for key, us in _run(path).items():
                    best[version][key] = min(us, best[version].get(key, us))
    if args.output == "json":
        print(json.dumps({"against": args.against, **best}))
        return
    print(f"{'us per request (min of ' + str(args.rounds) + ' rounds)':48s} {args.against[:12]:>12s} "
          f"{'this tree':>10s} {'ratio':>7s}")  # fmt: skip
    for key, after in best["after"].items():
        before = best["before"].get(key)
        ratio = f"{after / before:7.2f}" if before else "    n/a"
        print(f"{key:48s} {before if before is not None else float('nan'):12.1f} {after:10.1f} {ratio}")


if __name__ == "__main__":
    from saved import save_if_asked  # benchmarks/saved.py

    save_if_asked()  # --save PATH: this run's output, command, date and commit as a result record
    main()
