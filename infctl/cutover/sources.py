"""Where gate metrics come from: the router's own ``/metrics`` (per upstream group) or Prometheus.

Both answer :meth:`GateSource.measure` with one :class:`GroupStats` per group over the window that began at
the last :meth:`GateSource.start`. The router source diffs two scrapes of one router; Prometheus sums every
router replica it scrapes (``increase``/``rate`` over the window), which is what a cluster with several
router replicas needs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from infctl.cutover.gates import QUANTILES, GroupStats
from infctl.cutover.window import ERROR_STATUSES, REQUESTS, THROTTLE_STATUSES, TTFT, WANTED, window_stats
from infctl.errors import MetricsError
from infctl.telemetry.prometheus import MetricFamilies, parse_metrics


class GateSource(Protocol):
    async def start(self) -> None:
        """Begin a window (after the split was last changed)."""

    async def measure(self, window_s: float) -> dict[str, GroupStats]:
        """Each group's stats since :meth:`start`; ``window_s`` is how long ago that was."""


@dataclass
class RouterMetricsSource:
    """Scrapes ``{url}/metrics`` of one router at both ends of the window."""

    client: httpx.AsyncClient
    url: str
    groups: Sequence[str]
    _before: MetricFamilies | None = None

    async def start(self) -> None:
        self._before = await self._scrape()

    async def measure(self, window_s: float) -> dict[str, GroupStats]:
        after = await self._scrape()
        before, self._before = self._before or {}, after
        return {g: window_stats(before, after, g) for g in self.groups}

    async def _scrape(self) -> MetricFamilies:
        url = self.url.rstrip("/") + "/metrics"
        try:
            resp = await self.client.get(url)
        except httpx.HTTPError as err:
            raise MetricsError(f"GET {url}: {type(err).__name__}: {err}", hint="is the router up?") from None
        if resp.status_code != 200:
            raise MetricsError(
                f"GET {url} answered HTTP {resp.status_code}", hint="is this an infctl router?"
            )
        return parse_metrics(resp.text, WANTED)


@dataclass
class PrometheusGateSource:
    """PromQL instant queries over Prometheus' HTTP API (``GET /api/v1/query``)."""

    client: httpx.AsyncClient
    url: str
    groups: Sequence[str]
    selector: str = ""
    """Extra label matchers for every series, e.g. ``namespace="inference"``."""

    async def start(self) -> None:
        return None

    def queries(self, window_s: float) -> dict[str, str]:
        groups = "|".join(self.groups)
        sel = f'upstream=~"{groups}"' + (f",{self.selector}" if self.selector else "")
        rng = f"[{max(1, math.ceil(window_s))}s]"
        out = {"requests": f"sum by (upstream, status) (increase({REQUESTS}{{{sel}}}{rng}))"}
        for q in QUANTILES.values():
            out[f"ttft_{q}"] = (
                f"histogram_quantile({q}, sum by (le, upstream) (rate({TTFT}_bucket{{{sel}}}{rng})))"
            )
        return out

    async def measure(self, window_s: float) -> dict[str, GroupStats]:
        counts: dict[str, dict[str, float]] = {g: {} for g in self.groups}
        ttft: dict[str, dict[float, float | None]] = {
            g: dict.fromkeys(QUANTILES.values()) for g in self.groups
        }
        for key, query in self.queries(window_s).items():
            for labels, value in await self._query(query):
                group = labels.get("upstream", "")
                if group not in counts or math.isnan(value):
                    continue
                if key == "requests":
                    counts[group][labels.get("status", "")] = value
                else:
                    ttft[group][float(key.removeprefix("ttft_"))] = value
        return {g: _stats(counts[g], ttft[g]) for g in self.groups}

    async def _query(self, query: str) -> list[tuple[dict[str, str], float]]:
        url = self.url.rstrip("/") + "/api/v1/query"
        try:
            resp = await self.client.get(url, params={"query": query})
            body: dict[str, Any] = resp.json()
        except (httpx.HTTPError, ValueError) as err:
            raise MetricsError(
                f"GET {url}: {type(err).__name__}: {err}", hint="check --prometheus URL"
            ) from None
        if resp.status_code != 200 or body.get("status") != "success":
            why = body.get("error") or resp.status_code
            hint = "check --prometheus URL and --prometheus-selector"
            raise MetricsError(f"Prometheus at {url} refused {query!r}: {why}", hint=hint)
        data = body.get("data") or {}
        if data.get("resultType") != "vector":
            raise MetricsError(f"{url}: expected a vector for {query!r}, got {data.get('resultType')!r}")
        return [(r.get("metric", {}), float(r["value"][1])) for r in data.get("result", [])]


def _stats(by_status: dict[str, float], ttft: dict[float, float | None]) -> GroupStats:
    return GroupStats(
        requests=sum(by_status.values()),
        errors=sum(n for s, n in by_status.items() if s in ERROR_STATUSES),
        throttled=sum(n for s, n in by_status.items() if s in THROTTLE_STATUSES),
        ttft_s=ttft,
    )
