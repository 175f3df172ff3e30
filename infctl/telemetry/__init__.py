"""Prometheus text parsing and scraping, shared by router, autoscaler, bench and doctor."""

from infctl.telemetry.prometheus import (
    MetricFamilies,
    Sample,
    histogram_buckets,
    histogram_quantile,
    label_values,
    mean_value,
    parse_metrics,
    value,
)
from infctl.telemetry.scrape import (
    DEFAULT_CONNECT_TIMEOUT_S,
    DEFAULT_TIMEOUT_S,
    LoadSource,
    MetricsSource,
    fetch_load,
    make_client,
    scrape,
    scrape_many,
)
from infctl.telemetry.signals import EngineSignals, LoadReport, RankLoad

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT_S",
    "DEFAULT_TIMEOUT_S",
    "EngineSignals",
    "LoadReport",
    "LoadSource",
    "MetricFamilies",
    "MetricsSource",
    "RankLoad",
    "Sample",
    "fetch_load",
    "histogram_buckets",
    "histogram_quantile",
    "label_values",
    "make_client",
    "mean_value",
    "parse_metrics",
    "scrape",
    "scrape_many",
    "value",
]
