"""The router's /metrics text: the engine-reported prefix-cache counters per backend."""

from __future__ import annotations

from infctl.router.metrics import RouterMetrics
from infctl.telemetry.prometheus import parse_metrics
from infctl.telemetry.signals import EngineSignals


def by_backend(text: str, name: str) -> dict[str, float]:
    return {s.labels["backend"]: s.value for s in parse_metrics(text).get(name, [])}


def test_engine_reported_prefix_hits_are_exposed_per_backend() -> None:
    engines = [
        ("a", EngineSignals(prefix_queries=1000.0, prefix_hits=600.0)),
        ("b", EngineSignals(prefix_queries=50.0, prefix_hits=0.0)),
        ("fresh", EngineSignals()),  # no lookup yet: no sample (a 0/0 rate helps nobody)
        ("unscraped", None),
    ]
    text = RouterMetrics().render([], "prefix", engines=engines)
    assert by_backend(text, "infctl_router_engine_prefix_cache_queries_total") == {"a": 1000.0, "b": 50.0}
    assert by_backend(text, "infctl_router_engine_prefix_cache_hits_total") == {"a": 600.0, "b": 0.0}
    assert "# TYPE infctl_router_engine_prefix_cache_hits_total counter" in text


def test_without_engine_signals_the_families_are_empty() -> None:
    text = RouterMetrics().render([("a", 0)], "round_robin")
    assert by_backend(text, "infctl_router_engine_prefix_cache_hits_total") == {}
