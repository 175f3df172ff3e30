"""What an autoscaler restart costs, starting cold or restoring the memory it saved (virtual clock).

    python benchmarks/bench_autoscaler_restart.py [--days business,consumer] [--seeds 6] [--at 8.5]
        [--down 60] [--jobs 2] [--save PATH]

The days of ``infctl simulate compare autoscaling`` (the same trace, engines, policy, timings and seeds), with
infctl's arm run three ways: the daemon never restarts; it restarts at hour ``--at`` of the day (a rolling
upgrade during the morning ramp) and is gone ``--down`` seconds of life (scaled with the day's timings), then
starts cold; the same restart, restoring the memory the old daemon saved after its last decision
(``infctl.autoscaler.memory``, the daemon's code). Every figure is deterministic (a virtual clock), so
``--jobs`` only changes how long it takes. Printed per day: GPU-hours against the static peak fleet and the
TTFT SLO's attainment, mean and range over the seeds, and both restarts' changes against no restart, side by
side, with the requests each one lost to the SLO.
"""

from __future__ import annotations

import argparse
import statistics
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace

from infctl.sim.cluster.run import simulate
from infctl.sim.cluster.scenarios.autoscaling import DAYS, autoscaling_day, compressed_day
from infctl.sim.cluster.scenarios.catalog import ScenarioSize
from infctl.sim.cluster.scenarios.measures import gpu_hours, slo_attainment

ARMS = ("no restart", "restart, cold", "restart, memory")


@dataclass(frozen=True)
class Job:
    day: str
    seed: int
    arm: str
    at_hour: float
    down_s: float
    requests: int


def run(job: Job) -> tuple[Job, float, float, int]:
    """GPU-hours, SLO attainment and requests over the SLO of ``job``'s infctl arm (or its static arm)."""
    size = ScenarioSize(engines=8, requests=job.requests, seed=job.seed)
    sc = autoscaling_day(job.day, size)
    if job.arm == "static":
        cfg = sc.arms[0].config(sc.base)
    else:
        cfg = sc.arms[sc.ours].config(sc.base)
        d = compressed_day(job.day, size)
        assert cfg.autoscale is not None
        if job.arm != ARMS[0]:
            restart = d.day_s * job.at_hour / 24
            settings = replace(
                cfg.autoscale,
                restarts=(restart,),
                restart_down_s=job.down_s * d.scale,
                memory=job.arm == ARMS[2],
            )
            cfg = replace(cfg, autoscale=settings)
    result = simulate(cfg)
    slo = slo_attainment(result) or 0.0
    return job, gpu_hours(result), slo, round((1 - slo) * len(result.bench.requests))


def _range(xs: list[float], fmt: str) -> str:
    return f"{fmt.format(statistics.mean(xs))} ({fmt.format(min(xs))}..{fmt.format(max(xs))})"


def main() -> None:
    from saved import save_if_asked  # benchmarks/saved.py

    save_if_asked()
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--days", default="business,consumer", help=f"comma-separated, of {', '.join(DAYS)}")
    parser.add_argument("--seeds", type=int, default=6, help="seeds 0..N-1 (default 6)")
    parser.add_argument("--at", type=float, default=8.5, help="hour of the day it restarts (default 8.5)")
    parser.add_argument("--down", type=float, default=60.0, help="seconds of life it is gone (default 60)")
    parser.add_argument("--requests", type=int, default=2000, help="requests per day (default 2000)")
    parser.add_argument("--jobs", type=int, default=2, help="processes (default 2)")
    args = parser.parse_args()
    days = [d.strip() for d in args.days.split(",") if d.strip()]
    if unknown := [d for d in days if d not in DAYS]:
        parser.error(f"unknown day(s) {', '.join(unknown)}: one of {', '.join(DAYS)}")
    if args.seeds < 1 or args.jobs < 1 or not 0 <= args.at < 24 or args.down < 0:
        parser.error("--seeds and --jobs must be >= 1, --at within 0..24, --down >= 0")
    jobs = [
        Job(day, seed, arm, args.at, args.down, args.requests)
        for day in days
        for seed in range(args.seeds)
        for arm in ("static", *ARMS)
    ]
    print(
        f"infctl's autoscaler restarting at {args.at:g} h, gone {args.down:g} s of life; "
        f"{args.seeds} seed(s), {args.requests} requests a day; virtual clock"
    )
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        results = {(j.day, j.seed, j.arm): (g, s, n) for j, g, s, n in pool.map(run, jobs)}
    for day in days:
        print(f"\n{day} day")
        seeds = range(args.seeds)
        base = {s: results[(day, s, ARMS[0])] for s in seeds}
        for arm in ARMS:
            got = [results[(day, s, arm)] for s in seeds]
            saved = [
                100 * (g / results[(day, s, "static")][0] - 1)
                for s, (g, _, _) in zip(seeds, got, strict=True)
            ]
            slo = [100 * x[1] for x in got]
            line = f"  {arm:16s} GPU-h vs static {_range(saved, '{:+.1f}%')}  SLO {_range(slo, '{:.2f}%')}"
            if arm != ARMS[0]:
                extra_h = [g - base[s][0] for s, (g, _, _) in zip(seeds, got, strict=True)]
                misses = [n - base[s][2] for s, (_, _, n) in zip(seeds, got, strict=True)]
                line += (
                    f"  vs no restart: GPU-h {statistics.mean(extra_h):+.3f} per day, "
                    f"{sum(misses):+d} requests over the SLO in {args.seeds} days"
                )
            print(line)


if __name__ == "__main__":
    main()
