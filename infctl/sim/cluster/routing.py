"""The router, unchanged: a ``RouterCore`` deciding over snapshots built by the live router's own
``BackendPool``, from engine signals scraped on an interval (stale in between, as live) and the pool's
in-flight counters (always current: the router counts its own requests).

PD fleets are paired by ``RouterCore.route_pd`` with the router's in-flight bookkeeping on the decode
backend only, as the live proxy keeps it. Admission control is ``admission.AdmissionRoom``'s.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from infctl.router.core import RouterCore
from infctl.router.policies.pd import PDDecision, PDSettings
from infctl.router.policies.pipeline import build_policy
from infctl.router.pool import BackendPool
from infctl.router.snapshot import Backend, RequestInfo
from infctl.sim.cluster.fleet import SimEngine
from infctl.telemetry.kv_events import KVEvent


class SimRouter:
    """One router replica in front of the fleet."""

    def __init__(
        self, policy: str | Mapping[str, Any], pools: Sequence[str | None] = (), *, block_size: int = 16
    ) -> None:
        self.core = RouterCore(build_policy(policy), block_size=block_size)
        self._pools = list(pools)
        self._added = 0
        self.pool = BackendPool([])
        self.reasons: Counter[str] = Counter()
        """Decisions by reason (prefix_hit, least_load, round_robin...), as the router's metrics count."""
        self.matched_tokens = 0
        """Prompt tokens the chosen backends were expected to hold (the router's estimate)."""
        self.prompt_tokens = 0
        """Prompt tokens routed (the live router's ``infctl_router_prompt_tokens_total``)."""
        self._event_seq: Counter[str] = Counter()
        self._cached: dict[str, int] = {}
        """Request id -> prompt tokens the router expected cached where it sent the request."""

    def add(self, engine: SimEngine) -> None:
        """Register ``engine``: the i-th engine added joins the i-th pool named (later ones the last)."""
        pool = self._pools[min(self._added, len(self._pools) - 1)] if self._pools else None
        self._added += 1
        self.pool.add(
            Backend(id=engine.id, url=f"sim://{engine.id}", pool=pool, role=engine.role, group=engine.group)
        )

    def drain(self, engine: SimEngine) -> None:
        self.pool.set_draining(engine.id)

    def remove(self, engine: SimEngine) -> None:
        self.pool.remove(engine.id)
        self.core.forget(engine.id)

    def kv_events(self, backend_id: str, events: Sequence[KVEvent]) -> None:
        """One engine's KV event batch, numbered per engine as its publisher would."""
        self._event_seq[backend_id] += 1
        self.core.apply_kv_events(backend_id, self._event_seq[backend_id], events)

    def scrape(self, engines: Iterable[SimEngine], now: float) -> None:
        """One scrape round: every serving engine's current signals, stamped ``now``."""
        record = self.pool.record_signals
        for e in engines:
            if e.state in ("ready", "draining"):
                record(e.id, e.signals(), now)

    def route(self, info: RequestInfo, expected_tokens: int, now: float) -> str:
        """Pick a backend (raises NoBackendError when none can take it) and count the request in flight."""
        decision = self.core.route(self.pool.snapshot(now), info)
        self.reasons[decision.reason] += 1
        self.prompt_tokens += info.prompt_tokens
        cached = min(info.prompt_tokens, decision.matched_blocks * info.block_size)
        self.matched_tokens += decision.matched_blocks * info.block_size
        # As the live proxy: only the prompt tokens the router does not expect cached queue as prefill.
        self._cached[info.request_id] = cached
        self.pool.start(decision.backend_id, info.prompt_tokens, expected_tokens, cached_tokens=cached)
        return decision.backend_id

    def route_pd(self, info: RequestInfo, expected_tokens: int, now: float, pd: PDSettings) -> PDDecision:
        """Pair a prefill and a decode backend (``prefill`` None: the decode backend runs it all); raises
        NoBackendError. As the live proxy: the request counts in flight on the decode backend, with no
        prompt tokens expected cached, and its prefill leg on the prefill backend until ``prefill_done``.

        A disaggregated prompt thus queues on its decode backend until the first token, though that engine
        only receives its KV. Only ``pick_pd``'s cost of a short prompt the decode engine would prefill
        itself reads it, and it keeps those off decode backends with a first token due (a local prefill
        there lengthens the step that emits it). Counting it as cached instead (queued nowhere) measured
        Pool-mode TTFT p50 +2.7% / +1.5% on 8 / 16 engines (worse in every variant), Group mode and p99
        within the variants' spread (benchmarks/bench_pd_accounting.py)."""
        decision = self.core.route_pd(self.pool.snapshot(now), info, pd)
        self.reasons[decision.reason] += 1
        self.prompt_tokens += info.prompt_tokens
        self._cached[info.request_id] = 0
        self.pool.start(decision.decode, info.prompt_tokens, expected_tokens, cached_tokens=0)
        if decision.prefill is not None:
            self.pool.start_prefill_leg(decision.prefill, info.prompt_tokens)
        return decision

    def prefill_done(self, backend_id: str, prompt_tokens: int) -> None:
        """A prefill leg ended (answered or failed): it no longer counts on its prefill backend."""
        self.pool.finish_prefill_leg(backend_id, prompt_tokens)

    def first_token(self, backend_id: str, prompt_tokens: int, request_id: str) -> None:
        cached = self._cached.get(request_id, 0)
        self.pool.first_token(backend_id, prompt_tokens, cached_tokens=cached)

    def finish(
        self, backend_id: str, prompt_tokens: int, expected_tokens: int, request_id: str, *, got_first: bool
    ) -> None:
        cached = self._cached.pop(request_id, 0)
        self.pool.finish(
            backend_id, prompt_tokens, expected_tokens, got_first=got_first, cached_tokens=cached
        )
