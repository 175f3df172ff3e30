"""The figures a comparison reads from one arm's :class:`~infctl.sim.cluster.SimResult` (pure).

Each returns SI units (seconds, fractions, per second, hours) or None when nothing was measured. Scenarios
whose load plan has a paced stage then a saturating one (``PACED``, ``SATURATED``) read latencies from the
first and capacity from the second: an open-loop run's throughput is only its offered load.
"""

from __future__ import annotations

from collections.abc import Callable

from infctl.bench.metrics import Summary, summarize
from infctl.bench.scenarios import SHORT_MAX_TOKENS
from infctl.bench.stats import Distribution
from infctl.sim.cluster.result import SimResult

PACED, SATURATED = 0, 1
"""Stage indexes of a two-stage plan: open loop below capacity, then a closed loop above it."""

Reader = Callable[[SimResult], float | None]


def _stage(r: SimResult, stage: int | None) -> Summary:
    return r.bench.summary if stage is None else r.bench.stages[stage].summary


def _q(d: Distribution, q: str) -> float | None:
    return d[q] if d.count else None


def ttft(q: str, stage: int | None = None) -> Reader:
    """TTFT percentile ``q`` ("p50", "p99"...) of every request (of ``stage``)."""
    return lambda r: _q(_stage(r, stage).ttft, q)


def itl(q: str, stage: int | None = None) -> Reader:
    return lambda r: _q(_stage(r, stage).itl, q)


def short_ttft(q: str, stage: int | None = None) -> Reader:
    """TTFT percentile of prompts up to :data:`~infctl.bench.scenarios.SHORT_MAX_TOKENS` (the demo's cut)."""

    def read(r: SimResult) -> float | None:
        recs = [x for x in r.bench.requests if x.input_tokens <= SHORT_MAX_TOKENS]
        if stage is not None:
            recs = [x for x in recs if x.stage == stage]
        return _q(summarize(recs).ttft, q)

    return read


def output_throughput(stage: int | None = None) -> Reader:
    """Output tokens per second, first send to last completion (of ``stage``)."""
    return lambda r: _stage(r, stage).output_throughput


def request_throughput(stage: int | None = None) -> Reader:
    return lambda r: _stage(r, stage).request_throughput


def engine_hit_rate(r: SimResult) -> float | None:
    """Prompt tokens the engines found in HBM / prompt tokens they looked up (their /metrics counters)."""
    return r.hit_rate


def cached_fraction(r: SimResult) -> float | None:
    """Prompt tokens served from any cache (HBM or a second tier) / prompt tokens, as clients saw them
    (``usage.prompt_tokens_details.cached_tokens``)."""
    return r.bench.summary.cached_fraction


def gpu_hours(r: SimResult) -> float:
    return r.gpu_hours


def peak_engines(r: SimResult) -> float:
    return float(r.peak_engines)


def slo_attainment(r: SimResult) -> float | None:
    """Requests that met every objective of the config's SLO / requests sent."""
    return r.bench.summary.good_fraction


def failed(r: SimResult) -> float:
    return float(r.bench.summary.failed)


def tpot(q: str, stage: int | None = None) -> Reader:
    """TPOT percentile ``q`` of every request (of ``stage``)."""
    return lambda r: _q(_stage(r, stage).tpot, q)


def goodput(stage: int | None = None) -> Reader:
    """Requests per second that met every objective of the config's SLO (of ``stage``)."""
    return lambda r: _stage(r, stage).goodput
