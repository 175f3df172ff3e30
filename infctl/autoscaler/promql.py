"""Engine signals from Prometheus: one PromQL instant query over the HTTP API (``GET /api/v1/query``).

The query selects every sample the engine adapter reads (``{__name__=~"...", <selector>}``), so the
adapter turns each pod's samples into signals exactly as it does a scrape. Pods are told apart by the
``pod`` label and their role and group come from the labels the PodMonitor copies from the pods
(``infctl.io/role`` becomes ``infctl_io_role``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from infctl.autoscaler.snapshot import ReplicaSignals
from infctl.errors import MetricsError
from infctl.telemetry import MetricsSource
from infctl.telemetry.prometheus import HISTOGRAM_SUFFIXES, MetricFamilies, Sample


@dataclass(frozen=True)
class PrometheusSource:
    """Where and how to query."""

    url: str
    """Prometheus base URL, e.g. ``http://prometheus.monitoring.svc:9090``."""
    selector: Mapping[str, str] = field(default_factory=dict)
    """Label matchers every series must carry, e.g. ``{"namespace": "inference"}``."""
    pod_label: str = "pod"
    role_label: str = "infctl_io_role"
    group_label: str = "infctl_io_group"
    pool_label: str = "infctl_io_pool"

    def query(self, adapter: MetricsSource) -> str:
        names = "|".join(sorted(adapter.wanted_metrics))
        suffixes = "|".join(HISTOGRAM_SUFFIXES)
        matchers = [f'__name__=~"({names})({suffixes})?"']
        matchers += [f'{k}="{_escape(v)}"' for k, v in sorted(self.selector.items())]
        return "{" + ",".join(matchers) + "}"


async def query_signals(
    client: httpx.AsyncClient, source: PrometheusSource, adapter: MetricsSource
) -> tuple[ReplicaSignals, ...]:
    """Every pod's signals from one instant query; MetricsError naming the URL when it fails."""
    url = source.url.rstrip("/") + "/api/v1/query"
    try:
        resp = await client.get(url, params={"query": source.query(adapter)})
    except httpx.HTTPError as err:
        raise MetricsError(f"GET {url}: {type(err).__name__}", hint="check --prometheus URL") from None
    body = _json(resp, url)
    if resp.status_code != 200 or body.get("status") != "success":
        raise MetricsError(
            f"GET {url} answered HTTP {resp.status_code}: {body.get('error') or resp.text[:200]}",
            hint="check the selector labels and that Prometheus scrapes the engines",
        )
    data = body.get("data") or {}
    if data.get("resultType") != "vector":
        raise MetricsError(f"GET {url}: expected a vector result, got {data.get('resultType')!r}")
    pods: dict[str, MetricFamilies] = {}
    meta: dict[str, tuple[str, str | None, str | None]] = {}
    for series in data.get("result", []):
        labels: dict[str, str] = series.get("metric", {})
        pod = labels.get(source.pod_label) or labels.get("instance", "?")
        name = labels.pop("__name__", "")
        pods.setdefault(pod, {}).setdefault(name, []).append(Sample(labels, float(series["value"][1])))
        meta[pod] = (
            labels.get(source.role_label, "both"),
            labels.get(source.group_label),
            labels.get(source.pool_label),
        )
    out = []
    for pod, families in sorted(pods.items()):
        s = adapter.signals(families)
        role, group, pool = meta[pod]
        out.append(ReplicaSignals(pod, role, group, True, s.queue, s.running, s.kv_usage, pool))
    return tuple(out)


def _json(resp: httpx.Response, url: str) -> dict[str, Any]:
    try:
        body = resp.json()
    except ValueError:
        raise MetricsError(
            f"GET {url} answered non-JSON (HTTP {resp.status_code}): {resp.text[:200]!r}",
            hint="is this the Prometheus base URL?",
        ) from None
    return body if isinstance(body, dict) else {}


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')
