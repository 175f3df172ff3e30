"""Reading the signals: engines' /metrics directly, the router's /metrics, or Prometheus (thin I/O).

Engines are scraped through :mod:`infctl.telemetry` with their engine adapter, so no metric name is spelled
here. The router contributes its admission queue (``infctl_router_queue_depth``, and per pool
``infctl_router_pool_queue_depth``: what wakes a pool scaled to zero) and TTFT p99 over the
last interval, from the difference between two scrapes of its cumulative histogram
(``infctl_router_time_to_first_byte_seconds``), as ``histogram_quantile(rate(...))`` would, and the demand
(the rates of its routing-decision and prompt-token counters, less the tokens it expected cached) that the
forecast reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import httpx

from infctl.autoscaler.fleet import ReplicaInfo
from infctl.autoscaler.snapshot import Demand, ReplicaSignals
from infctl.errors import MetricsError
from infctl.telemetry import MetricsSource, histogram_buckets, parse_metrics, scrape_many, value
from infctl.telemetry.prometheus import MetricFamilies, Sample, histogram_quantile

ROUTER_QUEUE = "infctl_router_queue_depth"
ROUTER_POOL_QUEUE = "infctl_router_pool_queue_depth"
ROUTER_TTFT = "infctl_router_time_to_first_byte_seconds"
ROUTER_DECISIONS = "infctl_router_decisions_total"
ROUTER_PROMPT = "infctl_router_prompt_tokens_total"
ROUTER_CACHED = "infctl_router_estimated_cached_tokens_total"

Buckets = tuple[tuple[float, float], ...]
"""Cumulative ``(upper bound, count)`` pairs of a histogram."""


@dataclass(frozen=True, slots=True)
class RouterReading:
    queue: float
    """Requests held by the router's admission control."""
    ttft_p99_s: float | None
    """TTFT p99 since the previous reading; None without one, or when no request got its first byte."""
    buckets: Buckets
    """This reading's TTFT histogram, for the next window."""
    counts: tuple[float, float, float] = (0.0, 0.0, 0.0)
    """The router's counters: requests routed, prompt tokens routed, prompt tokens expected cached."""
    pool_queue: tuple[tuple[str, float], ...] = ()
    """Requests held per pool they wait for."""


def demand_between(
    before: tuple[float, float, float], after: tuple[float, float, float], seconds: float
) -> Demand | None:
    """Requests and uncached prompt tokens per second between two readings of the router's counters (None
    without elapsed time, or when a counter went down: the router restarted)."""
    if seconds <= 0 or any(b > a for b, a in zip(before, after, strict=True)):
        return None
    routed, prompt, cached = (a - b for b, a in zip(before, after, strict=True))
    return Demand(routed / seconds, max(0.0, prompt - cached) / seconds)


async def scrape_replicas(
    client: httpx.AsyncClient, replicas: Sequence[ReplicaInfo], adapter: MetricsSource
) -> tuple[tuple[ReplicaSignals, ...], list[MetricsError]]:
    """Signals of every ready replica (unready ones are listed without load); failed scrapes are returned
    as errors and left out, so they count neither as idle nor as busy."""
    ready = {r.url: r for r in replicas if r.ready}
    scraped = await scrape_many(client, {url: adapter for url in ready})
    out = [ReplicaSignals(r.name, r.role, r.group, ready=False, pool=r.pool) for r in replicas if not r.ready]
    errors = []
    for url, got in scraped.items():
        if isinstance(got, MetricsError):
            errors.append(got)
            continue
        r = ready[url]
        out.append(
            ReplicaSignals(r.name, r.role, r.group, True, got.queue, got.running, got.kv_usage, pool=r.pool)
        )
    return tuple(out), errors


async def router_backends(
    client: httpx.AsyncClient, router_url: str, token: str | None = None
) -> tuple[ReplicaSignals, ...]:
    """Per-engine signals as the router last scraped them (``GET /admin/backends``): the source when the
    actuator lists no replicas and there is no Prometheus. Ejected and draining backends are not ready."""
    url = router_url.rstrip("/") + "/admin/backends"
    headers = {"authorization": f"Bearer {token}"} if token else {}
    try:
        resp = await client.get(url, headers=headers)
    except httpx.HTTPError as err:
        raise MetricsError(f"GET {url}: {type(err).__name__}", hint="is the router running?") from None
    if resp.status_code != 200:
        raise MetricsError(
            f"GET {url} answered HTTP {resp.status_code}",
            hint="set INFCTL_ROUTER_ADMIN_TOKEN to the router's admin token",
        )
    out = []
    for b in resp.json().get("backends", []):
        ready = not b.get("ejected") and not b.get("draining") and b.get("queue") is not None
        out.append(
            ReplicaSignals(
                str(b["id"]),
                str(b.get("role") or "both"),
                b.get("group"),
                ready,
                float(b.get("queue") or 0),
                float(b.get("running") or 0),
                float(b.get("kv_usage") or 0),
                b.get("pool"),
            )
        )
    return tuple(out)


async def read_router(client: httpx.AsyncClient, router_url: str, previous: Buckets | None) -> RouterReading:
    """The router's queue and TTFT p99 since ``previous``; MetricsError when /metrics cannot be read."""
    url = router_url.rstrip("/") + "/metrics"
    try:
        resp = await client.get(url)
    except httpx.HTTPError as err:
        raise MetricsError(f"GET {url}: {type(err).__name__}", hint="is the router running?") from None
    if resp.status_code != 200:
        raise MetricsError(f"GET {url} answered HTTP {resp.status_code}")
    families = parse_metrics(
        resp.text,
        {ROUTER_QUEUE, ROUTER_POOL_QUEUE, ROUTER_TTFT, ROUTER_DECISIONS, ROUTER_PROMPT, ROUTER_CACHED},
    )
    buckets = tuple(histogram_buckets(families, ROUTER_TTFT))
    p99 = None if previous is None else window_quantile(0.99, previous, buckets)
    counts = (
        value(families, ROUTER_DECISIONS),
        value(families, ROUTER_PROMPT),
        value(families, ROUTER_CACHED),
    )
    pools = tuple((s.labels.get("pool", ""), s.value) for s in families.get(ROUTER_POOL_QUEUE, ()))
    return RouterReading(value(families, ROUTER_QUEUE), p99, buckets, counts, pools)


def window_quantile(q: float, before: Buckets, after: Buckets) -> float | None:
    """The ``q`` quantile of the observations made between two readings of a cumulative histogram.

    A counter that went down (the router restarted) makes ``after`` the whole window.
    """
    old = dict(before)
    if any(count < old.get(bound, 0.0) for bound, count in after):
        old = {}
    delta = [Sample({"le": _le(bound)}, count - old.get(bound, 0.0)) for bound, count in after]
    families: MetricFamilies = {"h_bucket": delta}
    return histogram_quantile(q, families, "h")


def _le(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(bound)
