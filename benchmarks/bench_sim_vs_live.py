"""The same workload through the live local stack and through the cluster simulator: do they agree?

    python benchmarks/bench_sim_vs_live.py [--requests 240] [--rates 6,14] [--rounds 3] [--policy P]

Live: one ``infctl sim --instances 4`` process (Llama-3-8B/H100 timing, real HTTP, SSE, /metrics) behind
one ``infctl router`` process, started as ``benchmarks/bench_router.py`` starts them (its helpers,
imported), driven by ``infctl bench``'s load generator with the engines' prefix caches emptied first.
Simulated: ``infctl.sim.cluster.simulate`` with the same profile (and KV blocks), engine count, routing
policy, block size, workload, load plan and seed.

Workloads: the demo's shared prefixes (48 prefixes of 2k tokens, Zipf 0.6) at the first rate, and a Poisson
chat mix (lognormal prompts around 512 tokens and outputs around 128, chat API) at both rates. For each:
TTFT p50/p99, ITL p50 and the engines' prefix-cache hit rate, live and simulated, with the simulator's
relative error (goal: TTFT p50 within 10%).

The live path has costs the engine model has not: the router's proxying and HTTP on both hops, tokenizing
the prompt text, the asyncio loops of router, engines and client sharing this machine's two cores. The
simulator stands for them with the profile's request overhead (the delay before a request reaches its engine
core, off the batch's critical path). This benchmark measures it first, apart from the runs it is then
judged on: one request at a time on the idle stack at two prompt lengths (256 and 2,048 tokens), for each
API (completions and chat: the chat path renders messages), live TTFT p50 minus simulated. The line through
the two gaps gives the fixed part (``request_overhead_us``) and the part per prompt token
(``request_overhead_us_per_ktok``), medians over rounds (``--live-overhead-ms`` skips the probe). The table
shows the simulator without it and with it. A round with a failed live request is dropped (and said so): it
measures the machine, not the stack. Tails (p99) on this shared machine are its CPU contention, which no
engine model has; read the p50 errors.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
import time
from pathlib import Path
from statistics import median

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_router import ENGINES, MODEL, Router, Sim, free_port, reset

from infctl.bench import BenchConfig, BenchResult, LoadPlan, Stage, run_benchmark
from infctl.bench.workloads import LengthDist, RandomSpec, SharedPrefixSpec
from infctl.bench.workloads.base import Api
from infctl.bench.workloads.specs import WorkloadSpec
from infctl.sim.cluster import SimConfig, simulate
from infctl.sim.profiles import SimProfile, get_profile

BLOCKS = 2048
"""KV blocks of 16 tokens per engine: 32k tokens, as bench_router's shared-prefix run."""
SHARED = SharedPrefixSpec(
    groups=48, prefix_tokens=2048, zipf=0.6, input=LengthDist(mean=64), output=LengthDist(mean=32)
)
PROBE_TOKENS, PROBE_REQUESTS = (256, 2048), 40
CHAT = RandomSpec(
    input=LengthDist(kind="lognormal", mean=512, sigma=0.6, max=4096),
    output=LengthDist(kind="lognormal", mean=128, sigma=0.5, max=512),
)


@dataclasses.dataclass
class Figures:
    ttft_p50: float
    ttft_p99: float
    itl_p50: float
    hit: float | None
    failed: int = 0
    error: str = ""
    """The first failure's detail, if any."""

    @classmethod
    def of(cls, r: BenchResult) -> Figures:
        s = r.summary
        hit = r.server.hit_rate if r.server else None
        first = next(iter(s.error_examples.values()), "")
        return cls(s.ttft["p50"], s.ttft["p99"], s.itl["p50"], hit, s.failed, first)

    @classmethod
    def median(cls, rounds: list[Figures]) -> Figures:
        """Each figure's median over rounds (a round hit by another process's burst does not decide)."""
        hits = [f.hit for f in rounds if f.hit is not None]
        return cls(
            median(f.ttft_p50 for f in rounds),
            median(f.ttft_p99 for f in rounds),
            median(f.itl_p50 for f in rounds),
            median(hits) if hits else None,
        )


@dataclasses.dataclass(frozen=True)
class Overhead:
    """The live path's cost per request: ``fixed_ms`` plus ``per_ktok_ms`` per 1,000 prompt tokens."""

    fixed_ms: float = 0.0
    per_ktok_ms: float = 0.0

    def __str__(self) -> str:
        return f"{self.fixed_ms:.2f} ms + {self.per_ktok_ms:.2f} ms per 1k prompt tokens"


NONE = Overhead()


def profile(overhead: Overhead) -> SimProfile:
    """The live engines' profile: llama3-8b-h100 with ``BLOCKS`` blocks, 32k context, model ``MODEL``, and
    the live path's overhead as the profile's request overhead."""
    return get_profile("llama3-8b-h100").with_overrides(
        num_gpu_blocks=BLOCKS,
        max_model_len=32768,
        model=MODEL,
        request_overhead_us=overhead.fixed_ms * 1e3,
        request_overhead_us_per_ktok=overhead.per_ktok_ms * 1e3,
    )


def simulated(workload: WorkloadSpec, load: LoadPlan, api: Api, policy: str, overhead: Overhead) -> Figures:
    p = profile(overhead)
    cfg = SimConfig(workload=workload, load=load, engines=ENGINES, profile=p, policy=policy, api=api, seed=1)
    return Figures.of(simulate(cfg).bench)


async def live(sim: Sim, workload: WorkloadSpec, load: LoadPlan, api: Api, policy: str) -> Figures:
    port = free_port()
    backends = [a for u in sim.engines for a in ("--backend", u)]
    # Words, as the simulated engines and the cluster simulator count: the two arms must hash alike.
    argv = [sys.executable, "-m", "infctl", "router", "--engine", "vllm", "--tokenizer", "words",
            "--port", str(port), "--policy", policy, *backends]  # fmt: skip
    router = Router(f"infctl {policy}", argv, port)
    router.start()
    try:
        await reset(sim.engines)
        cfg = BenchConfig(url=router.url, model=MODEL, api=api, workload=workload, load=load, seed=1,
                          engine_urls=list(sim.engines), label=f"live {policy}")  # fmt: skip
        res = await run_benchmark(cfg)
    finally:
        router.stop()
    return Figures.of(res)


async def probe_overhead(sim: Sim, policy: str, api: Api) -> Overhead | None:
    """Live minus simulated TTFT p50 of lone requests (one in flight) at two prompt lengths: the line
    through the two gaps (its slope clamped at 0: a shorter prompt never costs more). None if any failed."""
    gaps = []
    for tokens in PROBE_TOKENS:
        workload = RandomSpec(input=LengthDist(mean=tokens), output=LengthDist(mean=4))
        load = LoadPlan(stages=[Stage(concurrency=1, num_requests=PROBE_REQUESTS)])
        lv = await live(sim, workload, load, api, policy)
        if lv.failed:
            print(f"(probe, {api}: {lv.failed} failed, e.g. {lv.error}: round dropped)")
            return None
        bare = simulated(workload, load, api, policy, NONE)
        gaps.append((lv.ttft_p50 - bare.ttft_p50) * 1e3)
        print(f"(probe, {api}, {tokens}-token prompts one at a time: TTFT p50 live {lv.ttft_p50 * 1e3:.1f} "
              f"ms, sim {bare.ttft_p50 * 1e3:.1f} ms)", flush=True)  # fmt: skip
    (short, long_), (g_short, g_long) = PROBE_TOKENS, gaps
    slope = max(0.0, (g_long - g_short) / (long_ - short) * 1e3)
    return Overhead(max(0.0, g_short - slope * short / 1e3), slope)


def _overhead(given_ms: float | None, probes: list[Overhead]) -> Overhead:
    if given_ms is not None:
        return Overhead(given_ms)
    if not probes:
        raise SystemExit("every probe round failed: is the machine overloaded?")
    return Overhead(median(o.fixed_ms for o in probes), median(o.per_ktok_ms for o in probes))


def _err(sim: float | None, live: float | None) -> str:
    if sim is None or live is None or not live:
        return "n/a"
    return f"{(sim - live) / live * 100:+.0f}%"


def _ms(x: float) -> str:
    return f"{x * 1e3:.1f}"


def print_rows(name: str, lv: Figures, bare: Figures, with_oh: Figures) -> None:
    print(f"\n== {name} ==")
    print(f"{'measure':12s} {'live':>8s} {'sim':>8s} {'err':>6s} {'sim+oh':>8s} {'err':>6s}")
    for label, a, b, c, fmt in (
        ("TTFT p50 ms", lv.ttft_p50, bare.ttft_p50, with_oh.ttft_p50, _ms),
        ("TTFT p99 ms", lv.ttft_p99, bare.ttft_p99, with_oh.ttft_p99, _ms),
        ("ITL p50 ms", lv.itl_p50, bare.itl_p50, with_oh.itl_p50, _ms),
    ):
        print(f"{label:12s} {fmt(a):>8s} {fmt(b):>8s} {_err(b, a):>6s} {fmt(c):>8s} {_err(c, a):>6s}")
    hits = [f"{h:.1%}" if h is not None else "n/a" for h in (lv.hit, bare.hit, with_oh.hit)]
    print(f"{'hit rate':12s} {hits[0]:>8s} {hits[1]:>8s} {_err(bare.hit, lv.hit):>6s} {hits[2]:>8s} "
          f"{_err(with_oh.hit, lv.hit):>6s}", flush=True)  # fmt: skip


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=240, help="Requests per run.")
    ap.add_argument("--rates", default="6,14", help="Two request rates, req/s (the chat mix runs at both).")
    ap.add_argument("--policy", default="cache_aware", help="Router preset, the same live and simulated.")
    ap.add_argument("--rounds", type=int, default=3, help="Live runs of each workload; figures are medians.")
    ap.add_argument("--live-overhead-ms", type=float, default=None,
                    help="Fixed live-path cost per request; default: measured here.")  # fmt: skip
    args = ap.parse_args()
    rates = [float(x) for x in args.rates.split(",")]
    runs: list[tuple[str, WorkloadSpec, float, Api]] = [
        (f"shared prefixes at {rates[0]:g} req/s", SHARED, rates[0], "completions"),
        *((f"chat mix at {r:g} req/s", CHAT, r, "chat") for r in rates),
    ]
    started = time.perf_counter()
    loads = [LoadPlan(stages=[Stage(rate=rate, num_requests=args.requests)]) for _, _, rate, _ in runs]
    lives: list[list[Figures]] = [[] for _ in runs]
    probes: dict[Api, list[Overhead]] = {"completions": [], "chat": []}
    with Sim(blocks=BLOCKS) as sim:
        # A throwaway run first: the processes' first requests pay for imports and warm-up.
        await live(sim, CHAT, LoadPlan(stages=[Stage(rate=rates[0], num_requests=20)]), "chat", args.policy)
        for rnd in range(args.rounds):
            for api in probes if args.live_overhead_ms is None else ():
                if (o := await probe_overhead(sim, args.policy, api)) is not None:
                    probes[api].append(o)
            for i, (name, workload, _, api) in enumerate(runs):
                f = await live(sim, workload, loads[i], api, args.policy)
                note = f", {f.failed} failed (e.g. {f.error}): round dropped" if f.failed else ""
                print(f"(round {rnd + 1}, {name}: TTFT p50 live {f.ttft_p50 * 1e3:.1f} ms{note})", flush=True)
                if not f.failed:
                    lives[i].append(f)
    overheads = {api: _overhead(args.live_overhead_ms, found) for api, found in probes.items()}
    print(f"\n{ENGINES} engines (llama3-8b-h100, {BLOCKS * 16} tokens of KV each), policy {args.policy}, "
          f"{args.requests} requests per run, live figures the median of the rounds without failures; "
          f"live-path overhead (median of the probes): completions {overheads['completions']}, chat "
          f"{overheads['chat']}")  # fmt: skip
    for (name, workload, _, api), load, rounds in zip(runs, loads, lives, strict=True):
        if not rounds:
            print(f"\n== {name}: every live round failed ==")
            continue
        bare = simulated(workload, load, api, args.policy, NONE)
        with_oh = simulated(workload, load, api, args.policy, overheads[api])
        spread = ", ".join(f"{f.ttft_p50 * 1e3:.1f}" for f in rounds)
        print_rows(f"{name} (live TTFT p50 by round: {spread} ms)", Figures.median(rounds), bare, with_oh)
    print(f"\n[{time.perf_counter() - started:.0f} s]")


if __name__ == "__main__":
    from saved import save_if_asked  # benchmarks/saved.py

    save_if_asked()  # --save PATH: this run's output, command, date and commit as a result record
    asyncio.run(main())
