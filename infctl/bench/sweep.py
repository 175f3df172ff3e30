"""Rate sweeps (``--sweep 1,2,4,8``) and the search for the highest rate that meets the SLOs (``--find-max``).

Every probe is a full run of the configured workload (same seed) with its first stage's length (duration
or request count) at one constant rate. A rate meets the SLOs when at least ``attainment`` of its requests
are good (succeeded within every objective). The search doubles the rate while it passes, then bisects
between the last pass and the first failure until they are within ``precision`` of each other.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from infctl.bench.config import BenchConfig, Stage
from infctl.bench.load import ProgressFn
from infctl.bench.result import BenchResult
from infctl.bench.run import run_benchmark
from infctl.errors import ConfigError

OnRun = Callable[[float, BenchResult], None]


@dataclass
class SweepResult:
    runs: list[BenchResult] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "sweep", "runs": [r.to_dict(timeseries=False) for r in self.runs]}


@dataclass
class Probe:
    rate: float
    result: BenchResult
    passed: bool


@dataclass
class MaxRateResult:
    attainment: float
    best_rate: float | None = None
    """The highest rate that met the SLOs; None when even the lowest probe failed."""
    probes: list[Probe] = field(default_factory=list)

    @property
    def best(self) -> BenchResult | None:
        passed = [p for p in self.probes if p.passed and p.rate == self.best_rate]
        return passed[-1].result if passed else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "find-max",
            "attainment": self.attainment,
            "best_rate": self.best_rate,
            "probes": [{"rate": p.rate, "passed": p.passed, "result": p.result.to_dict(timeseries=False)}
                       for p in self.probes],
        }  # fmt: skip


def at_rate(cfg: BenchConfig, rate: float) -> BenchConfig:
    """``cfg`` with one constant-rate stage as long as its first stage."""
    first = cfg.load.stages[0]
    stage = Stage(rate=rate, duration_s=first.duration_s, num_requests=first.num_requests)
    load = cfg.load.model_copy(update={"stages": [stage]})
    label = f"{cfg.label} @ {rate:g} req/s" if cfg.label else f"{rate:g} req/s"
    return cfg.model_copy(update={"load": load, "label": label})


def meets(result: BenchResult, attainment: float) -> bool:
    frac = result.summary.good_fraction
    return frac is not None and frac >= attainment


async def sweep(
    cfg: BenchConfig,
    rates: list[float],
    *,
    progress: ProgressFn | None = None,
    stop: asyncio.Event | None = None,
    on_run: OnRun | None = None,
) -> SweepResult:
    stop = stop or asyncio.Event()
    out = SweepResult()
    for rate in rates:
        if stop.is_set():
            break
        result = await run_benchmark(at_rate(cfg, rate), progress=progress, stop=stop)
        cfg = cfg.model_copy(update={"model": result.metadata.model})
        out.runs.append(result)
        if on_run is not None:
            on_run(rate, result)
    return out


async def find_max_rate(
    cfg: BenchConfig,
    *,
    attainment: float = 0.9,
    start: float = 1.0,
    max_rate: float = 10_000.0,
    precision: float = 0.05,
    max_probes: int = 16,
    progress: ProgressFn | None = None,
    stop: asyncio.Event | None = None,
    on_run: OnRun | None = None,
) -> MaxRateResult:
    if cfg.slo is None:
        raise ConfigError("--find-max needs objectives", hint="add e.g. --slo ttft=2s,tpot=50ms")
    stop = stop or asyncio.Event()
    out = MaxRateResult(attainment)

    async def probe(rate: float) -> bool:
        nonlocal cfg
        result = await run_benchmark(at_rate(cfg, rate), progress=progress, stop=stop)
        cfg = cfg.model_copy(update={"model": result.metadata.model})
        passed = meets(result, attainment) and not stop.is_set()
        out.probes.append(Probe(rate, result, passed))
        if on_run is not None:
            on_run(rate, result)
        return passed

    lo: float | None = None
    hi: float | None = None
    rate = start
    while not stop.is_set() and len(out.probes) < max_probes:
        if await probe(rate):
            lo = rate
            if hi is not None or rate * 2 > max_rate:
                break
            rate *= 2
        else:
            hi = rate
            if lo is not None or rate / 2 < start / 64:
                break
            rate /= 2
    while lo is not None and hi is not None and (hi - lo) / hi > precision:
        if stop.is_set() or len(out.probes) >= max_probes:
            break
        mid = (lo + hi) / 2
        if await probe(mid):
            lo = mid
        else:
            hi = mid
    out.best_rate = lo
    return out
