"""Is the client the bottleneck? Send lag, achieved vs requested rate, CPU and event-loop lag. Pure."""

from __future__ import annotations

import math
from collections.abc import Sequence

from infctl.bench.config import LoadPlan, Stage
from infctl.bench.load import LoopStats
from infctl.bench.records import RequestRecord
from infctl.bench.result import ClientHealth
from infctl.bench.stats import describe

LAG_P99_LIMIT_S = 0.010
"""Send lag above this at p99 means sends left late: the schedule the server saw was not the one asked for."""
RATE_SHORTFALL = 0.90
"""Achieved send rate below this fraction of the schedule's own rate means the client could not keep up."""
CPU_LIMIT = 0.90
"""A client process using more than this share of one core is likely slowing its own measurements."""
LOOP_LAG_P99_LIMIT_S = 0.010


def achieved_rate(records: Sequence[RequestRecord]) -> float | None:
    """Sends per second between the first and the last send (None below two sends)."""
    if len(records) < 2:
        return None
    sent = [r.sent_s for r in records]
    span = max(sent) - min(sent)
    return (len(records) - 1) / span if span > 0 else None


def scheduled_rate(records: Sequence[RequestRecord]) -> float | None:
    """The rate the arrival process actually drew (a Poisson schedule's own rate varies around the target)."""
    if len(records) < 2:
        return None
    sched = [r.scheduled_s for r in records]
    span = max(sched) - min(sched)
    return (len(records) - 1) / span if span > 0 else None


def client_health(records: Sequence[RequestRecord], plan: LoadPlan, stats: LoopStats) -> ClientHealth:
    lag = describe(r.send_lag_s for r in records)
    loop = describe(stats.loop_lag_s)
    cpu = stats.cpu_s / stats.wall_s if stats.wall_s > 0 else 0.0
    warnings: list[str] = []
    for i, stage in enumerate(plan.stages):
        warnings += _stage_warnings(i, stage, [r for r in records if r.stage == i], len(plan.stages) > 1)
    open_loop = any(s.mode != "concurrency" and not _infinite(s) for s in plan.stages)
    if open_loop and lag.count and lag["p99"] > LAG_P99_LIMIT_S:
        if stats.gate_waits:
            warnings.append(
                f"{stats.gate_waits} sends waited for a free slot under max_concurrency: send lag "
                f"p99 {lag['p99'] * 1e3:.1f} ms is the cap at work, not the client"
            )
        else:
            warnings.append(
                f"send lag p99 {lag['p99'] * 1e3:.1f} ms (limit {LAG_P99_LIMIT_S * 1e3:.0f} ms): "
                "requests left later than scheduled; the client limited this run"
            )
    if cpu > CPU_LIMIT:
        warnings.append(f"client CPU at {cpu:.0%} of one core: the load generator is near its ceiling")
    if loop.count and loop["p99"] > LOOP_LAG_P99_LIMIT_S:
        warnings.append(
            f"client event loop lagged {loop['p99'] * 1e3:.1f} ms at p99 (busy, or starved of CPU by other "
            "processes): latencies may be inflated by up to that much"
        )
    single = plan.stages[0] if len(plan.stages) == 1 else None
    return ClientHealth(
        send_lag=lag,
        loop_lag=loop,
        cpu_util=cpu,
        requested_rate=single.mean_rate if single is not None else None,
        achieved_rate=achieved_rate(records),
        gate_waits=stats.gate_waits,
        limited=bool(warnings) and not (stats.gate_waits and len(warnings) == 1),
        warnings=warnings,
    )


def _infinite(stage: Stage) -> bool:
    return stage.rate is not None and math.isinf(stage.rate)


def _stage_warnings(i: int, stage: Stage, recs: list[RequestRecord], named: bool) -> list[str]:
    if stage.mode == "concurrency" or _infinite(stage) or len(recs) < 10:
        return []
    want, got = scheduled_rate(recs), achieved_rate(recs)
    if want is None or got is None or got >= RATE_SHORTFALL * want:
        return []
    where = f"stage {i + 1}: " if named else ""
    return [
        f"{where}achieved {got:.1f} req/s of the {want:.1f} req/s scheduled: the client could not keep up"
    ]
