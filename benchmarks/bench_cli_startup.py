"""How long `infctl --version`, `infctl --help` and a command's `--help` take, as a shell runs them.

    python benchmarks/bench_cli_startup.py [--runs 15] [--target 0.3]

Each command runs ``--runs`` times as a fresh ``python -m infctl`` process (wall clock from spawn to exit,
output discarded), interleaved so that a burst of load on the machine hits every command alike; one unmeasured
round first warms the page cache. Reported per command: min, median, p90 and max in ms, the median CPU time
(user + system: what the command costs, less moved by other load than the wall clock), and whether the median
is under ``--target`` seconds (the issue's bar for ``--help`` and ``--version``). A bare ``python -c pass``
row is the interpreter's own floor on this machine, so the rest can be read as infctl's share above it.

Timings, not a test: on a loaded 2-core machine the spread is wide; compare medians from the same run.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

COMMANDS: dict[str, list[str]] = {
    "python -c pass (floor)": [sys.executable, "-c", "pass"],
    "infctl --version": [sys.executable, "-m", "infctl", "--version"],
    "infctl --help": [sys.executable, "-m", "infctl", "--help"],
    "infctl validate --help": [sys.executable, "-m", "infctl", "validate", "--help"],
    "infctl bench --help": [sys.executable, "-m", "infctl", "bench", "--help"],
}


def once(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds: the child's user + system time)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=15, help="Measured runs per command.")
    parser.add_argument("--target", type=float, default=0.3, help="Bar for the median, seconds.")
    args = parser.parse_args()
    for argv in COMMANDS.values():
        once(argv)
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in COMMANDS}
    for _ in range(args.runs):
        for name, argv in COMMANDS.items():
            times[name].append(once(argv))
    head = f"{'command':<26} {'min':>6} {'median':>6} {'p90':>6} {'max':>6} {'cpu p50':>7}"
    print(f"{head}  median < {args.target:g} s")
    for name, runs in times.items():
        ms = sorted(w * 1e3 for w, _ in runs)
        cpu = statistics.median(c * 1e3 for _, c in runs)
        p90 = ms[min(len(ms) - 1, round(0.9 * (len(ms) - 1)))]
        median = statistics.median(ms)
        verdict = "" if "floor" in name else ("yes" if median < args.target * 1e3 else "NO")
        print(f"{name:<26} {ms[0]:6.0f} {median:6.0f} {p90:6.0f} {ms[-1]:6.0f} {cpu:7.0f}  {verdict}")
    load = os.getloadavg()[0]
    print(
        f"{args.runs} runs each, interleaved; ms from spawn to exit, cpu = the child's user+system time "
        f"(python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {load:.1f})"
    )


if __name__ == "__main__":
    from saved import save_if_asked  # benchmarks/saved.py

    save_if_asked()  # --save PATH: this run's output, command, date and commit as a result record
    main()
