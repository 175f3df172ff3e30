"""The autoscaler's own /metrics (``infctl_autoscaler_*``): what every decision saw and chose."""

from __future__ import annotations

import math
from collections import Counter

from infctl.autoscaler.snapshot import Decision, Recommendation
from infctl.telemetry.exposition import Writer, label_pairs

PREFIX = "infctl_autoscaler_"

_GAUGES = (
    ("ready", "ready_replicas", "Ready units (groups in group mode) the decision counted as capacity."),
    ("pending", "pending_replicas", "Units asked for but not ready yet."),
    ("needed", "needed_replicas", "Units the current load needs at the scale-up thresholds."),
    ("queue_per_replica", "queue_per_replica", "Waiting requests per ready replica (busiest role)."),
    ("kv_usage", "kv_usage", "Mean KV-cache usage of ready replicas, 0..1 (busiest role)."),
)


def direction(rec: Recommendation) -> str:
    return "up" if rec.desired > rec.current else "down" if rec.desired < rec.current else "hold"


class AutoscalerMetrics:
    """Gauges of the last decision and counters of all of them. One per daemon."""

    def __init__(self, dry_run: bool) -> None:
        self.dry_run = dry_run
        self.last: Decision | None = None
        self.last_at: float = 0.0
        self.router_queue = 0.0
        self.ttft_p99: float | None = None
        self.decisions: Counter[tuple[str, str]] = Counter()
        """(unit, up|down|hold) -> decisions."""
        self.scaled: Counter[tuple[str, str]] = Counter()
        """(unit, up|down) -> scale calls the actuator accepted."""
        self.errors: Counter[str] = Counter()
        """stage (observe, signals, router, scale) -> failures."""

    def record(self, decision: Decision, at: float, router_queue: float, ttft: float | None) -> None:
        self.last, self.last_at, self.router_queue, self.ttft_p99 = decision, at, router_queue, ttft
        for rec in decision.recommendations:
            self.decisions[(rec.role, direction(rec))] += 1

    def render(self) -> str:
        w = Writer({})
        recs = self.last.recommendations if self.last else ()
        w.header(f"{PREFIX}desired_replicas", "gauge", "Units the last decision asked for.")
        for rec in recs:
            w.sample(f"{PREFIX}desired_replicas", label_pairs({"unit": rec.role}), rec.desired)
        w.header(f"{PREFIX}current_replicas", "gauge", "Units asked for before the last decision.")
        for rec in recs:
            w.sample(f"{PREFIX}current_replicas", label_pairs({"unit": rec.role}), rec.current)
        for key, name, help_ in _GAUGES:
            w.header(PREFIX + name, "gauge", help_)
            for rec in recs:
                v = dict(rec.inputs).get(key, math.nan)
                w.sample(PREFIX + name, label_pairs({"unit": rec.role}), v)
        w.gauge(
            f"{PREFIX}router_queue", "Requests held by the router's admission control.", "", self.router_queue
        )
        ttft = math.nan if self.ttft_p99 is None else self.ttft_p99
        w.gauge(f"{PREFIX}ttft_p99_seconds", "Router TTFT p99 over the last interval.", "", ttft)
        w.counters(
            f"{PREFIX}decisions_total",
            "Decisions by unit and direction (up, down, hold).",
            _by_unit(self.decisions),
        )
        w.counters(
            f"{PREFIX}scale_events_total", "Scale calls made, by unit and direction.", _by_unit(self.scaled)
        )
        w.counters(
            f"{PREFIX}errors_total",
            "Failed steps by stage (observe, signals, router, scale).",
            ((label_pairs({"stage": s}), n) for s, n in sorted(self.errors.items())),
        )
        w.gauge(
            f"{PREFIX}last_decision_timestamp_seconds", "Unix time of the last decision.", "", self.last_at
        )
        w.gauge(f"{PREFIX}dry_run", "1 when recommendations are not applied.", "", float(self.dry_run))
        return w.text()


def _by_unit(counts: Counter[tuple[str, str]]) -> list[tuple[str, float]]:
    return [(label_pairs({"unit": u, "direction": d}), n) for (u, d), n in sorted(counts.items())]
