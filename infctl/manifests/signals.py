"""Helpers over the engine's signal metrics (:attr:`infctl.engines.EngineAdapter.signal_metrics`: which of
its metrics carries which signal) for alert rules and dashboards."""

from __future__ import annotations

from infctl.engines import SignalMetrics


def slo_bucket(metrics: SignalMetrics, slo_s: float) -> float:
    """The largest TTFT bucket bound not above ``slo_s`` (a histogram can only count below its bounds)."""
    fitting = [b for b in metrics.ttft_buckets if b <= slo_s]
    return max(fitting) if fitting else metrics.ttft_buckets[0]


def prom_le(bound: float) -> str:
    """A bucket bound as Prometheus client libraries print it in ``le`` (``1.0``, ``2.5``, ``0.1``)."""
    return repr(float(bound))
