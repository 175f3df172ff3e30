"""What each group did between two scrapes of the router's ``/metrics`` (pure).

Counters are diffed (a counter that went down means the router restarted: the later value is the delta, as
Prometheus' ``increase`` assumes); TTFT quantiles come from the histogram's bucket deltas, interpolated as
PromQL's ``histogram_quantile`` does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from infctl.cutover.gates import QUANTILES, GroupStats
from infctl.telemetry.prometheus import MetricFamilies, Sample, histogram_quantile

REQUESTS = "infctl_router_upstream_requests_total"
TTFT = "infctl_router_upstream_time_to_first_byte_seconds"
WANTED = frozenset({REQUESTS, TTFT})
ERROR_STATUSES = frozenset({"5xx", "broken", "failed"})
"""Status classes that count as errors: 5xx heads, streams cut short, connections that failed."""
THROTTLE_STATUSES = frozenset({"4xx"})


def window_stats(before: MetricFamilies, after: MetricFamilies, group: str) -> GroupStats:
    """One group's requests, errors, throttles and TTFT quantiles between ``before`` and ``after``."""
    by_status: dict[str, float] = {}
    for labels, delta in _deltas(before, after, REQUESTS, {"upstream": group}):
        status = labels.get("status", "")
        by_status[status] = by_status.get(status, 0.0) + delta
    buckets: dict[str, float] = {}
    for labels, delta in _deltas(before, after, TTFT + "_bucket", {"upstream": group}):
        buckets[labels["le"]] = buckets.get(labels["le"], 0.0) + delta
    hist: MetricFamilies = {TTFT + "_bucket": [Sample({"le": le}, n) for le, n in buckets.items()]}
    return GroupStats(
        requests=sum(by_status.values()),
        errors=sum(n for s, n in by_status.items() if s in ERROR_STATUSES),
        throttled=sum(n for s, n in by_status.items() if s in THROTTLE_STATUSES),
        ttft_s={q: histogram_quantile(q, hist, TTFT) for q in QUANTILES.values()},
    )


def _deltas(
    before: MetricFamilies, after: MetricFamilies, name: str, match: Mapping[str, str]
) -> Iterable[tuple[dict[str, str], float]]:
    start = {_key(s.labels): s.value for s in before.get(name, ()) if _matches(s, match)}
    for s in after.get(name, ()):
        if _matches(s, match):
            was = start.get(_key(s.labels), 0.0)
            yield s.labels, s.value - was if s.value >= was else s.value


def _matches(s: Sample, match: Mapping[str, str]) -> bool:
    return all(s.labels.get(k) == v for k, v in match.items())


def _key(labels: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(labels.items()))
