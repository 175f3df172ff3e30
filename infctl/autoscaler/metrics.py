"""The autoscaler's own /metrics (``infctl_autoscaler_*``): what every decision saw and chose."""

from __future__ import annotations

import math
from collections import Counter

from infctl.autoscaler.snapshot import Decision, Recommendation
from infctl.autoscaler.startup import Ledger
from infctl.telemetry.exposition import Histogram, Writer, label_pairs

PREFIX = "infctl_autoscaler_"
STARTUP_BUCKETS = (1, 2.5, 5, 10, 15, 30, 45, 60, 90, 120, 180, 240, 300, 450, 600, 900, 1200, 1800, 3600)
"""Seconds from a replica asked for to ready: a simulated engine's second up to a large MoE model's weights
over the network in tens of minutes; 180 is scale_to_zero.hold_s's default, 3600 the startup probe's
budget."""

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
        self.hold_s: float | None = None
        """The router's ``hold_when_empty_s`` start-ups are checked against; None: not known."""
        self.startups: dict[str, Histogram] = {}
        """unit -> seconds from each replica a scale-up asked for to ready; a restart is not timed."""
        self.longest: dict[str, float] = {}
        """unit -> the longest of its recent start-ups."""
        self.over_hold: dict[str, bool] = {}
        """unit that may scale to 0 -> whether a recent start-up took longer than ``hold_s``."""
        self.memory_saved: bool | None = None
        """Whether the last save of the policy's memory worked; None: no memory kept (or none saved yet)."""

    def started(self, unit: str, samples: tuple[float, ...], ledger: Ledger) -> None:
        """Start-ups of ``unit`` that ended at the last observation, and its ledger after them."""
        hist = self.startups.setdefault(unit, Histogram(STARTUP_BUCKETS))
        for seconds in samples:
            hist.observe(seconds)
        if ledger.longest is not None:
            self.longest[unit] = ledger.longest

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
        if self.memory_saved is not None:
            w.gauge(
                f"{PREFIX}memory_saved",
                "1 when the last save of its memory (kept across restarts) worked; 0: a restart starts cold.",
                "",
                float(self.memory_saved),
            )
        self._render_startups(w)
        return w.text()

    def _render_startups(self, w: Writer) -> None:
        name = f"{PREFIX}replica_startup_seconds"
        w.header(name, "histogram", "Seconds from a replica a scale-up asked for to ready (not restarts).")
        for unit, hist in sorted(self.startups.items()):
            w.histogram_samples(name, label_pairs({"unit": unit}), hist)
        w.header(f"{PREFIX}replica_startup_longest_seconds", "gauge", "The longest recent scale-up start-up.")
        for unit, seconds in sorted(self.longest.items()):
            w.sample(f"{PREFIX}replica_startup_longest_seconds", label_pairs({"unit": unit}), seconds)
        if self.hold_s is not None:
            w.gauge(
                f"{PREFIX}hold_when_empty_seconds",
                "How long the router holds a request while a unit is at 0 (its hold_when_empty_s).",
                "",
                self.hold_s,
            )
        w.header(
            f"{PREFIX}startup_over_hold",
            "gauge",
            "1 when a recent start-up of a unit that may scale to 0 took longer than the router holds the "
            "request that wakes it (that request gets a 503): raise scale_to_zero.hold_s or keep min 1.",
        )
        for unit, over in sorted(self.over_hold.items()):
            w.sample(f"{PREFIX}startup_over_hold", label_pairs({"unit": unit}), float(over))


def _by_unit(counts: Counter[tuple[str, str]]) -> list[tuple[str, float]]:
    return [(label_pairs({"unit": u, "direction": d}), n) for (u, d), n in sorted(counts.items())]
