"""Benchmark metrics, exactly as REFERENCE.md section 3 defines them. Pure functions over records.

* **TTFT**: request sent -> first SSE event with non-empty content (role-only and empty events do not count).
* **TPOT**: ``(E2E - TTFT) / (output_tokens - 1)``, only for requests with more than one output token
  (aiperf and guidellm call this ITL).
* **ITL**: every gap between consecutive content events, pooled over all requests.
* **E2E**: request sent -> last content event.
* **Throughput**: requests/s, output tokens/s and total tokens/s over the wall time from the first send to
  the last completion; only successful requests' tokens count.
* **Goodput**: successful requests/s meeting every SLO, over the same wall time.

Latency statistics cover successful requests only; failures are counted by class.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from infctl.bench.records import ERROR_CLASSES, RequestRecord
from infctl.bench.slo import SLO
from infctl.bench.stats import Distribution, describe


@dataclass(frozen=True, slots=True)
class RequestMetrics:
    """One request's latencies in seconds; None where undefined (failed, no content, one token)."""

    ttft_s: float | None = None
    tpot_s: float | None = None
    e2e_s: float | None = None
    itl_s: tuple[float, ...] = ()


def request_metrics(rec: RequestRecord) -> RequestMetrics:
    if rec.error is not None or not rec.chunk_times:
        return RequestMetrics()
    times = rec.chunk_times
    ttft = times[0] - rec.sent_s
    e2e = times[-1] - rec.sent_s
    tpot = (e2e - ttft) / (rec.output_tokens - 1) if rec.output_tokens > 1 else None
    itl = tuple(b - a for a, b in itertools.pairwise(times))
    return RequestMetrics(ttft_s=ttft, tpot_s=tpot, e2e_s=e2e, itl_s=itl)


def is_good(rec: RequestRecord, m: RequestMetrics, slo: SLO) -> bool:
    """Succeeded and met every objective in ``slo`` (an undefined TPOT meets any TPOT objective)."""
    if rec.error is not None:
        return False
    if slo.ttft_s is not None and (m.ttft_s is None or m.ttft_s > slo.ttft_s):
        return False
    if slo.tpot_s is not None and m.tpot_s is not None and m.tpot_s > slo.tpot_s:
        return False
    return not (slo.e2e_s is not None and (m.e2e_s is None or m.e2e_s > slo.e2e_s))


@dataclass(frozen=True)
class Summary:
    """Aggregates over a set of requests. Latencies in seconds, rates per second."""

    total: int
    completed: int
    failed: int
    duration_s: float
    """First send -> last completion."""
    request_throughput: float
    input_throughput: float
    output_throughput: float
    total_token_throughput: float
    total_input_tokens: int
    total_output_tokens: int
    ttft: Distribution
    tpot: Distribution
    itl: Distribution
    e2e: Distribution
    input_tokens: Distribution
    output_tokens: Distribution
    slo: SLO | None = None
    good: int | None = None
    goodput: float | None = None
    """Good requests per second; None without an SLO."""
    cached_tokens: int | None = None
    """Sum of ``usage.prompt_tokens_details.cached_tokens`` over requests that reported it."""
    cached_fraction: float | None = None
    """cached_tokens / prompt tokens of those requests: the prefix-cache hit rate the client saw."""
    errors: dict[str, int] = field(default_factory=dict)
    """Failures by class (:data:`~infctl.bench.records.ERROR_CLASSES`)."""
    error_kinds: dict[str, int] = field(default_factory=dict)
    """Failures by kind: the class, with the status for HTTP errors (``http_503``)."""
    error_examples: dict[str, str] = field(default_factory=dict)
    """The first detail seen for each kind."""

    @property
    def good_fraction(self) -> float | None:
        return None if self.good is None or not self.total else self.good / self.total


def summarize(records: Sequence[RequestRecord], slo: SLO | None = None) -> Summary:
    """Aggregate ``records`` (warm-up requests must already be excluded)."""
    ok = [r for r in records if r.error is None]
    per = [request_metrics(r) for r in ok]
    duration = _wall_time(records)

    def rate(x: float) -> float:
        return x / duration if duration > 0 else 0.0

    total_in = sum(r.input_tokens for r in ok)
    total_out = sum(r.output_tokens for r in ok)
    good = sum(is_good(r, m, slo) for r, m in zip(ok, per, strict=True)) if slo else None
    cached = [r for r in ok if r.cached_tokens is not None]
    cached_sum = sum(r.cached_tokens or 0 for r in cached) if cached else None
    cached_in = sum(r.input_tokens for r in cached)
    failed = [r for r in records if r.error is not None]
    kinds = Counter(r.error_kind for r in failed if r.error_kind)
    examples: dict[str, str] = {}
    for r in failed:
        if r.error_kind:
            examples.setdefault(r.error_kind, r.error_detail)
    by_class = Counter(r.error for r in failed if r.error)
    return Summary(
        total=len(records),
        completed=len(ok),
        failed=len(failed),
        duration_s=duration,
        request_throughput=rate(len(ok)),
        input_throughput=rate(total_in),
        output_throughput=rate(total_out),
        total_token_throughput=rate(total_in + total_out),
        total_input_tokens=total_in,
        total_output_tokens=total_out,
        ttft=describe(m.ttft_s for m in per if m.ttft_s is not None),
        tpot=describe(m.tpot_s for m in per if m.tpot_s is not None),
        itl=describe(g for m in per for g in m.itl_s),
        e2e=describe(m.e2e_s for m in per if m.e2e_s is not None),
        input_tokens=describe(float(r.input_tokens) for r in ok),
        output_tokens=describe(float(r.output_tokens) for r in ok),
        slo=slo if slo else None,
        good=good,
        goodput=rate(good) if good is not None else None,
        cached_tokens=cached_sum,
        cached_fraction=(cached_sum / cached_in) if cached_sum is not None and cached_in else None,
        errors={c: by_class[c] for c in ERROR_CLASSES if by_class[c]},
        error_kinds=dict(sorted(kinds.items())),
        error_examples=examples,
    )


def _wall_time(records: Sequence[RequestRecord]) -> float:
    if not records:
        return 0.0
    return max(r.end_s for r in records) - min(r.sent_s for r in records)
