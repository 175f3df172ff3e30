"""How fast ``infctl simulate`` runs: a scaling curve (requests x engines -> seconds) and issue 9's targets.

    python benchmarks/bench_simulate_scale.py          # curve, Mooncake/16 point, 100k/128 extrapolated
    python benchmarks/bench_simulate_scale.py --full   # ... and the real 100k requests on 128 engines
    python benchmarks/bench_simulate_scale.py --where  # ... and where the CPU goes (cProfile, by component)

Targets (issue 9): the Mooncake trace (3,993 requests) on 16 engines under 30 s, and 100k requests on 128
engines under 10 minutes, on one core. Each point reports wall seconds and CPU seconds of this process (the
machine is shared: CPU time is the figure to judge), simulated requests per CPU second and how much faster
than real time the run went. The curve keeps the load per engine constant (shared-prefix chat: 16 system
prompts of 1,024 tokens, ~256-token questions and ~128-token answers at 4 req/s per engine on
``llama3-8b-h100``), so requests and engines grow together as they would in a bigger cluster. The 100k/128
point is extrapolated from the curve with CPU per request = a + b x engines (least squares): routing builds a
snapshot of every engine per request, so that term grows with the fleet.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
from collections import defaultdict
from pathlib import Path

from infctl.bench.config import LoadPlan, Stage
from infctl.bench.workloads import LengthDist, SharedPrefixSpec, TraceSpec
from infctl.bench.workloads.mooncake import sample_trace
from infctl.sim.cluster import SimConfig, SimResult, simulate
from infctl.sim.profiles import get_profile

TRACE = sample_trace()  # the public Mooncake trace shipped in data/
RATE_PER_ENGINE = 4.0
CURVE = ((1_000, 4), (4_000, 16), (8_000, 32), (16_000, 64))
MOONCAKE_TARGET_S, FULL_TARGET_S = 30.0, 600.0


def synthetic(requests: int, engines: int) -> SimConfig:
    return SimConfig(
        workload=SharedPrefixSpec(groups=16, prefix_tokens=1024,
                                  input=LengthDist(kind="normal", mean=256, std=64),
                                  output=LengthDist(kind="normal", mean=128, std=32)),
        load=LoadPlan(stages=[Stage(rate=RATE_PER_ENGINE * engines, num_requests=requests)]),
        engines=engines, policy="cache_aware",
    )  # fmt: skip


def mooncake(trace: Path) -> SimConfig:
    # Llama-3.1-8B serves 128k context; the profile's default 32k would refuse 672 of the trace's prompts
    # (at 128k a few longer ones still fail, as they would on the real engine).
    profile = get_profile("llama3-8b-h100").with_overrides(max_model_len=131_072)
    return SimConfig(
        workload=TraceSpec(path=trace), load=LoadPlan(stages=[Stage()]), engines=16, profile=profile
    )


def measure(cfg: SimConfig) -> tuple[SimResult, float, float]:
    cpu0, wall0 = time.process_time(), time.perf_counter()
    result = simulate(cfg)
    return result, time.perf_counter() - wall0, time.process_time() - cpu0


def row(name: str, r: SimResult, wall: float, cpu: float) -> str:
    n = r.bench.summary.total
    return (f"{name:<26} {n:>8} {r.config.engines:>5} {wall:>8.1f} {cpu:>8.1f} {n / cpu:>9.0f} "
            f"{r.steps / cpu:>9.0f} {r.sim_time_s / cpu:>8.1f}x {(r.hit_rate or 0):>6.1%}")  # fmt: skip


def fit(points: list[tuple[int, int, float]]) -> tuple[float, float]:
    """Least squares of CPU seconds per request = a + b * engines."""
    xs = [e for _, e, _ in points]
    ys = [cpu / n for n, _, cpu in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx else 0.0
    return my - b * mx, b


def where(cfg: SimConfig) -> None:
    """CPU by component: the engine core (scheduler, KV pool, its block hashes), the router, the simulator."""
    prof = cProfile.Profile()
    prof.runcall(simulate, cfg)
    stats = pstats.Stats(prof)
    groups: dict[str, float] = defaultdict(float)
    total = 0.0
    for (path, _line, func), (_cc, _nc, tt, _ct, callers) in stats.stats.items():  # type: ignore[attr-defined]
        total += tt
        if "tokens.py" in path and func == "block_hashes":
            engine_side = any("kvcache" in c[0] for c in callers)
            groups[
                "block hashes (engine: kvcache.SequenceHashes)" if engine_side else "block hashes (other)"
            ] += tt
        elif "/sim/scheduler.py" in path or "/sim/kvcache.py" in path:
            groups["EngineCore (scheduler.py, kvcache.py)"] += tt
        elif "/router/" in path:
            groups["router (RouterCore, indexes, BackendPool)"] += tt
        elif "/sim/cluster/" in path:
            groups["simulator (infctl/sim/cluster)"] += tt
        else:
            groups["other (builtins, bench metrics, workload)"] += tt
    print(f"\nwhere the CPU goes (cProfile self time, {total:.1f} s under the profiler):")
    for name, tt in sorted(groups.items(), key=lambda kv: -kv[1]):
        print(f"  {name:<48} {tt / total:6.1%}")
    print("  top functions:")
    for (path, line, func), (_cc, nc, tt, _ct, _) in sorted(stats.stats.items(),  # type: ignore[attr-defined]
                                                            key=lambda kv: -kv[1][2])[:8]:  # fmt: skip
        print(f"    {tt / total:6.1%}  {nc:>9} calls  {Path(path).name}:{line} {func}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--full", action="store_true", help="also run 100k requests on 128 engines")
    ap.add_argument("--where", action="store_true", help="profile the Mooncake point by component")
    ap.add_argument("--trace", type=Path, default=TRACE)
    args = ap.parse_args()
    print(f"{'point':<26} {'requests':>8} {'eng':>5} {'wall s':>8} {'cpu s':>8} {'req/cpu-s':>9} "
          f"{'steps/cpu-s':>9} {'virt/cpu':>9} {'hit':>6}")  # fmt: skip
    points: list[tuple[int, int, float]] = []
    for n, e in CURVE:
        r, wall, cpu = measure(synthetic(n, e))
        points.append((n, e, cpu))
        print(row("shared-prefix curve", r, wall, cpu), flush=True)
    a, b = fit(points)
    mc_cpu = None
    if args.trace.exists():
        r, wall, cpu = measure(mooncake(args.trace))
        mc_cpu = cpu
        print(row("Mooncake trace", r, wall, cpu), flush=True)
    guess = 100_000 * (a + b * 128)
    print(f"{'100k x 128 (extrapolated)':<26} {100_000:>8} {128:>5} {'':>8} {guess:>8.0f}")
    if args.full:
        r, wall, cpu = measure(synthetic(100_000, 128))
        print(row("100k x 128 (measured)", r, wall, cpu), flush=True)
        guess = cpu
    print(f"\nCPU per request = {a * 1e3:.2f} ms + {b * 1e6:.1f} us x engines (fit over the curve)")
    if mc_cpu is not None:
        share = mc_cpu / MOONCAKE_TARGET_S
        print(f"Mooncake/16: {mc_cpu:.1f} CPU s = {share:.2f} of the {MOONCAKE_TARGET_S:.0f} s target")
    print(f"100k/128: {guess:.0f} CPU s = {guess / FULL_TARGET_S:.2f} of the {FULL_TARGET_S:.0f} s target"
          f" ({'measured' if args.full else 'extrapolated'})")  # fmt: skip
    if args.where and args.trace.exists():
        where(mooncake(args.trace))


if __name__ == "__main__":
    from saved import save_if_asked  # benchmarks/saved.py

    save_if_asked()  # --save PATH: this run's output, command, date and commit as a result record
    main()
