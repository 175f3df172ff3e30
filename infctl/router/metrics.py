"""The router's own /metrics: what it decided, what it saw, what it cost."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable

from infctl.engines import ROOM_RANK_STRIDE
from infctl.router.kv_events import KVStats
from infctl.telemetry.exposition import Histogram, Writer, label_pairs
from infctl.telemetry.signals import EngineSignals

_LATENCY_BUCKETS = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
)  # fmt: skip
PREFIX = "infctl_router_"
log = logging.getLogger(__name__)


class RouterMetrics:
    """Counters and histograms, rendered on demand. One per router process."""

    def __init__(self) -> None:
        self.requests: Counter[tuple[str, str]] = Counter()
        """(backend, status class) -> requests."""
        self.decisions: Counter[tuple[str, str]] = Counter()
        """(policy, reason) -> decisions."""
        self.retries = 0
        self.rejected: Counter[str] = Counter()
        """reason -> requests answered by the router itself (no backend, bad request)."""
        self.ejections: Counter[str] = Counter()
        self.readmissions: Counter[str] = Counter()
        self.probe_rounds = 0
        """Completed health-probe rounds (every backend probed once)."""
        self.prompt_tokens = 0
        self.estimated_cached_tokens = 0
        self.exact_counts: Counter[str] = Counter()
        """when -> prompts the model's tokenizer counted: ``routing`` (the request waited for it),
        ``background`` (routed on the estimate, counted after), ``skipped`` (too many counts in flight)."""
        self.estimate_misses = 0
        """Background counts outside the estimate's band: the decision may have differed from the exact."""
        self.ttft = Histogram(_LATENCY_BUCKETS)
        self.e2e = Histogram(_LATENCY_BUCKETS)
        self.upstream_requests: Counter[tuple[str, str]] = Counter()
        """(upstream group, status class) -> requests: what a cutover gate compares, new against old."""
        self.upstream_ttft: dict[str, Histogram] = {}
        self.mirrored = 0
        self.broken_streams: Counter[str] = Counter()
        """outcome -> streams a backend broke after the client had part of them (``infctl.router.migrate``):
        ``continued`` on other backends to the end, ``finished`` (only the closing events were missing),
        ``error_event`` (ended with an in-band error), ``cut`` (could only be cut)."""
        self.stream_migrations = 0
        """Continuations of broken streams sent to another backend."""
        self.stream_error_events: Counter[str] = Counter()
        """reason -> broken streams ended with an in-band error event."""
        self.rooms_without_dp_size: Counter[str] = Counter()
        """prefill backend -> PD bootstrap rooms drawn for its rank without its engine's rank count, right
        only if that count divides ``ROOM_RANK_STRIDE`` (``infctl.engines.new_bootstrap_room``)."""
        self.pd_transfer_failures: Counter[tuple[str, str]] = Counter()
        """(prefill, decode) -> PD tries whose decode leg failed after its prefill leg succeeded (retried
        without that prefill: ``proxy._transfer_failed``)."""
        self._prefixes: dict[tuple[str, str, tuple[float, ...]], list[str]] = {}

    def room_without_dp_size(self, backend: str, rooms: int = 1) -> None:
        """Count ``rooms`` drawn for ``backend``'s rank by the fallback stride (a completion batch's: one a
        prompt); warn on its first."""
        if not self.rooms_without_dp_size[backend]:
            log.warning(
                "PD prefill %s pins a data-parallel rank but its rank count is unknown: bootstrap rooms are "
                "right only if the engine's count divides %d (every count up to 16); give the backend a "
                "dp_size (router file) or the pod infctl.io/data-parallel-size",
                backend,
                ROOM_RANK_STRIDE,
            )
        self.rooms_without_dp_size[backend] += rooms

    def observe_upstream(self, upstream: str, status: str, ttft_s: float | None) -> None:
        self.upstream_requests[(upstream, status)] += 1
        if ttft_s is not None:
            hist = self.upstream_ttft.get(upstream)
            if hist is None:
                hist = self.upstream_ttft[upstream] = Histogram(_LATENCY_BUCKETS)
            hist.observe(ttft_s)

    def render(
        self,
        inflight: Iterable[tuple[str, int]],
        policy: str,
        kv: KVStats | None = None,
        waiting: int = 0,
        engines: Iterable[tuple[str, EngineSignals | None]] = (),
        pools_waiting: Iterable[tuple[str, int]] = (),
    ) -> str:
        """The exposition text. ``engines``: each backend's last scraped signals (None before the first),
        for the engine-reported prefix-cache counters set beside the router's own estimate.
        ``pools_waiting``: admission-queue waiters per pool they wait for (what wakes a pool at zero)."""
        w = Writer(self._prefixes)
        w.counters(
            f"{PREFIX}requests_total",
            "Requests proxied, by backend and status class.",
            ((label_pairs({"backend": b, "status": s}), n) for (b, s), n in sorted(self.requests.items())),
        )
        w.counters(
            f"{PREFIX}decisions_total",
            "Routing decisions by policy and reason.",
            ((label_pairs({"policy": p, "reason": r}), n) for (p, r), n in sorted(self.decisions.items())),
        )
        w.counter(f"{PREFIX}retries_total", "Attempts retried on another backend.", "", self.retries)
        w.counters(
            f"{PREFIX}rejected_total",
            "Requests the router answered itself, by reason.",
            ((label_pairs({"reason": r}), n) for r, n in sorted(self.rejected.items())),
        )
        w.counters(
            f"{PREFIX}ejections_total",
            "Backends ejected after failures.",
            ((label_pairs({"backend": b}), n) for b, n in sorted(self.ejections.items())),
        )
        w.counters(
            f"{PREFIX}readmissions_total",
            "Ejected backends re-admitted by a health probe.",
            ((label_pairs({"backend": b}), n) for b, n in sorted(self.readmissions.items())),
        )
        w.counter(
            f"{PREFIX}health_probe_rounds_total",
            "Completed health-probe rounds (each probes every backend once).",
            "",
            self.probe_rounds,
        )
        w.counter(
            f"{PREFIX}prompt_tokens_total",
            "Prompt tokens routed: the model's count where made, else the estimate.",
            "",
            self.prompt_tokens,
        )
        w.counters(
            f"{PREFIX}exact_token_counts_total",
            "Prompts the model's tokenizer counted: while routing, after (routed on the estimate), skipped.",
            ((label_pairs({"when": k}), n) for k, n in sorted(self.exact_counts.items())),
        )
        w.counter(
            f"{PREFIX}estimate_misses_total",
            "Prompts routed on the estimate whose exact count fell outside the band it was trusted within.",
            "",
            self.estimate_misses,
        )
        w.counter(
            f"{PREFIX}estimated_cached_tokens_total",
            "Prompt tokens the chosen backend was expected to hold in its prefix cache.",
            "",
            self.estimated_cached_tokens,
        )
        _engine_cache(w, engines)
        w.header(f"{PREFIX}inflight_requests", "gauge", "Requests in flight per backend.")
        for backend, n in inflight:
            w.sample(f"{PREFIX}inflight_requests", label_pairs({"backend": backend}), n)
        w.gauge(f"{PREFIX}queue_depth", "Requests held by admission control.", "", waiting)
        w.header(
            f"{PREFIX}pool_queue_depth",
            "gauge",
            "Requests held by admission control, per pool they wait for.",
        )
        for pool, n in sorted(pools_waiting):
            w.sample(f"{PREFIX}pool_queue_depth", label_pairs({"pool": pool}), n)
        w.gauge(f"{PREFIX}policy_info", "The active policy.", label_pairs({"policy": policy}), 1)
        if kv is not None:
            w.counter(f"{PREFIX}kv_event_batches_total", "KV event batches applied.", "", kv.batches)
            w.counter(f"{PREFIX}kv_event_batches_missed_total", "KV event batches lost.", "", kv.missed)
        w.histogram(f"{PREFIX}time_to_first_byte_seconds", "Send to first byte (router TTFT).", "", self.ttft)
        w.histogram(f"{PREFIX}e2e_request_latency_seconds", "Router-side end-to-end latency.", "", self.e2e)
        w.counters(
            f"{PREFIX}upstream_requests_total",
            "Attempts by upstream group and status class (5xx and failed: answers retried elsewhere).",
            (
                (label_pairs({"upstream": u, "status": s}), n)
                for (u, s), n in sorted(self.upstream_requests.items())
            ),
        )
        w.counter(f"{PREFIX}mirrored_total", "Requests copied to a shadow group.", "", self.mirrored)
        w.counters(
            f"{PREFIX}pd_rooms_without_dp_size_total",
            "PD bootstrap rooms drawn for a prefill rank whose engine's rank count is unknown, by backend.",
            ((label_pairs({"backend": b}), n) for b, n in sorted(self.rooms_without_dp_size.items())),
        )
        w.counters(
            f"{PREFIX}pd_transfer_failures_total",
            "PD tries whose decode leg failed after its prefill leg answered (retried without that prefill).",
            (
                (label_pairs({"prefill": p, "decode": d}), n)
                for (p, d), n in sorted(self.pd_transfer_failures.items())
            ),
        )
        w.counters(
            f"{PREFIX}broken_streams_total",
            "Streams a backend broke after the client had part of them, by how they ended.",
            ((label_pairs({"outcome": o}), n) for o, n in sorted(self.broken_streams.items())),
        )
        w.counter(
            f"{PREFIX}stream_migrations_total",
            "Continuations of broken streams sent to another backend.",
            "",
            self.stream_migrations,
        )
        w.counters(
            f"{PREFIX}stream_error_events_total",
            "Broken streams ended with an in-band error event, by reason.",
            ((label_pairs({"reason": r}), n) for r, n in sorted(self.stream_error_events.items())),
        )
        name = f"{PREFIX}upstream_time_to_first_byte_seconds"
        w.header(name, "histogram", "Router TTFT by upstream group.")
        for upstream, hist in sorted(self.upstream_ttft.items()):
            w.histogram_samples(name, label_pairs({"upstream": upstream}), hist)
        return w.text()


def _engine_cache(w: Writer, engines: Iterable[tuple[str, EngineSignals | None]]) -> None:
    """The engines' own prefix-cache counters as the router last scraped them, per backend: hits over
    queries is the engine-reported hit rate, to compare with ``estimated_cached_tokens_total``. A backend
    whose engine reports no lookups yet (or has not been scraped) has no sample."""
    reported = [(b, s) for b, s in engines if s is not None and s.prefix_queries > 0]
    w.counters(
        f"{PREFIX}engine_prefix_cache_queries_total",
        "Prompt tokens each backend's engine looked up in its prefix cache (engine-reported, last scrape).",
        ((label_pairs({"backend": b}), s.prefix_queries) for b, s in reported),
    )
    w.counters(
        f"{PREFIX}engine_prefix_cache_hits_total",
        "Prompt tokens each backend's engine found in its prefix cache (engine-reported, last scrape).",
        ((label_pairs({"backend": b}), s.prefix_hits) for b, s in reported),
    )
