"""The router's live view of its backends: registry, health, last signals and its own in-flight counts.

This is mutable I/O-side state owned by one router process. Decisions never read it directly: they read the
frozen :class:`~infctl.router.snapshot.Snapshot` that :meth:`BackendPool.snapshot` builds from it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from infctl.engines import get_adapter
from infctl.router import health
from infctl.router.snapshot import Backend, BackendState, Snapshot
from infctl.telemetry.signals import EngineSignals

PREFILL_LEG_OUTPUT = 1
"""Tokens a PD prefill leg generates on its engine (vLLM's asks for one; SGLang's prefill engine stops after
the prefill): the leg's KV load there is its prompt and this."""


@dataclass(slots=True)
class _Live:
    backend: Backend
    given_dp_size: int | None = None
    """``dp_size`` as the backend was given (router file, discovery, admin API); ``backend.dp_size`` is its
    engine's own count once the engine reported one (:meth:`BackendPool.record_dp_ranks`)."""
    health: health.HealthState = field(default_factory=health.HealthState)
    signals: EngineSignals | None = None
    scraped_at: float | None = None
    inflight: int = 0
    queued_tokens: float = 0.0
    inflight_tokens: float = 0.0
    served: int = 0
    failed: int = 0


class BackendPool:
    """Backends by id, with their health and load. Not thread-safe: one event loop owns it."""

    def __init__(
        self,
        backends: Iterable[Backend],
        policy: health.HealthPolicy | None = None,
        *,
        engine: str | None = None,
    ) -> None:
        self.health_policy = policy or health.HealthPolicy()
        self.engine = engine
        """The engine of backends that name none (the router's ``engine``); None: backends are taken as
        given, no engine's rules applied (the cluster simulator's fleet)."""
        self._live: dict[str, _Live] = {}
        self._departed: dict[str, _Live] = {}
        """Removed backends with requests still in flight: their counts, until those finish or the id
        returns (a removed and re-added backend keeps counting the requests it had: the engine still runs
        them, and each one's ``finish`` will be counted against the id)."""
        self.has_prefill = False
        """Whether any backend has the prefill role (the router then pairs prefill and decode)."""
        self.version = 0
        """Bumped whenever a backend is added, redefined or removed: what per-request readers of the
        registry (the lean front's URL check) key their caches on."""
        self._engine_ranks: dict[str, int] = {}
        """Engine URL -> the data-parallel rank count the engine reported (``router.engine_ranks``)."""
        for b in backends:
            self.add(b)

    # registry -------------------------------------------------------------------------------------------
    def add(self, backend: Backend) -> None:
        """Register ``backend``, or replace the definition of the one with its id (health, signals and
        counts kept). A decode backend whose engine refuses requests without their prefill leg (SGLang) is
        registered as one that cannot prefill, however it was described: every way in (the router file,
        discovery, the admin API) passes here."""
        given = backend.dp_size
        backend = self._engine_rules(backend)
        if backend.id in self._live:
            live = self._live[backend.id]
            live.backend = backend
        else:
            gone = self._departed.pop(backend.id, None)
            live = self._live[backend.id] = _Live(backend)
            if gone is not None:
                live.inflight, live.queued_tokens = gone.inflight, gone.queued_tokens
                live.inflight_tokens = gone.inflight_tokens
        live.given_dp_size = given
        self._registry_changed()

    def remove(self, backend_id: str) -> Backend | None:
        """Stop routing to ``backend_id`` at once; its requests in flight still finish (and are counted)."""
        live = self._live.pop(backend_id, None)
        if live is not None and live.inflight > 0:
            self._departed[backend_id] = live
        url = live.backend.url if live is not None else None
        if url is not None and not any(other.backend.url == url for other in self._live.values()):
            # Another engine may come at that URL (a pod's IP is reused): it is read anew.
            self._engine_ranks.pop(url, None)
        self._registry_changed()
        return live.backend if live else None

    def _engine_rules(self, backend: Backend) -> Backend:
        backend = _with_ranks(backend, self._engine_ranks.get(backend.url))
        if self.engine is None or backend.role != "decode" or not backend.decode_can_prefill:
            return backend
        if get_adapter(backend.engine or self.engine).decode_serves_alone:
            return backend
        return replace(backend, decode_can_prefill=False)

    def record_dp_ranks(self, url: str, ranks: int) -> list[tuple[Backend, int | None]]:
        """The engine at ``url`` reports ``ranks`` data-parallel ranks: its backends that pin a rank take
        that count for ``dp_size`` (the rooms of an SGLang PD prefill are drawn modulo it), whatever they
        were given, and one that pins a rank the engine lacks leaves rotation. Returns each backend whose
        count changed, with the count it was given."""
        self._engine_ranks[url] = ranks
        changed = []
        for live in self._live.values():
            b = live.backend
            if b.url == url and b.dp_rank is not None and b.dp_size != ranks:
                live.backend = _with_ranks(b, ranks)
                changed.append((live.backend, live.given_dp_size))
        return changed

    def engine_ranks(self, url: str) -> int | None:
        """The rank count the engine at ``url`` reported, None before it has."""
        return self._engine_ranks.get(url)

    def _registry_changed(self) -> None:
        # has_prefill and version are read on every request (PD or not), so kept up to date here rather
        # than recomputed there.
        self.version += 1
        self.has_prefill = any(live.backend.role == "prefill" for live in self._live.values())

    def set_draining(self, backend_id: str, draining: bool = True) -> None:
        live = self._get(backend_id)
        live.backend = replace(live.backend, draining=draining)

    def set_weight(self, backend_id: str, weight: float) -> None:
        live = self._get(backend_id)
        live.backend = replace(live.backend, weight=weight)

    def ids(self) -> list[str]:
        return list(self._live)

    def serving_urls(self) -> list[str]:
        """Distinct URLs of the backends that may take requests now (healthy, not ejected, not draining),
        in registry order: where ``--tokenizer engine`` tokenizes. Called from worker threads, so it reads
        a copy of the registry (taken whole under the GIL) and mutates nothing."""
        urls: list[str] = []
        for live in list(self._live.values()):
            b = live.backend
            if b.url and b.healthy and not b.draining and not live.health.ejected and b.url not in urls:
                urls.append(b.url)
        return urls

    def backend(self, backend_id: str) -> Backend:
        return self._get(backend_id).backend

    def __contains__(self, backend_id: object) -> bool:
        return backend_id in self._live

    # signals and health ---------------------------------------------------------------------------------
    def record_signals(self, backend_id: str, signals: EngineSignals, now: float) -> None:
        live = self._live.get(backend_id)
        if live is not None:
            live.signals, live.scraped_at = signals, now

    def record_failure(self, backend_id: str, now: float, *, fatal: bool, error: str) -> bool:
        """Count a failure; returns True when it ejected the backend."""
        live = self._live.get(backend_id)
        if live is None:
            return False
        was = live.health.ejected
        live.health = health.on_failure(live.health, self.health_policy, now, fatal=fatal, error=error)
        live.failed += 1
        return live.health.ejected and not was

    def record_success(self, backend_id: str) -> None:
        live = self._live.get(backend_id)
        if live is not None:
            live.health = health.on_request_success(live.health)
            live.served += 1

    def record_probe_ok(self, backend_id: str, now: float) -> bool:
        """A health probe succeeded; returns True when it re-admitted the backend."""
        live = self._live.get(backend_id)
        if live is None:
            return False
        was = live.health.ejected
        live.health = health.on_probe_success(live.health, now)
        return was and not live.health.ejected

    def health_of(self, backend_id: str) -> health.HealthState:
        return self._get(backend_id).health

    # in-flight accounting -------------------------------------------------------------------------------
    def start(
        self, backend_id: str, prompt_tokens: int, expected_tokens: int, *, cached_tokens: int = 0
    ) -> None:
        """A request sent to ``backend_id``. Only its uncached prompt tokens queue as prefill work (the
        cached ones cost the engine nothing to prefill); all of them, and the expected output, hold KV."""
        live = self._get(backend_id)
        live.inflight += 1
        live.queued_tokens += _uncached(prompt_tokens, cached_tokens)
        live.inflight_tokens += prompt_tokens + expected_tokens

    def first_token(self, backend_id: str, prompt_tokens: int, *, cached_tokens: int = 0) -> None:
        """The request's prefill is over (its first token reached the router): its queued work is done."""
        live = self._counted(backend_id)
        if live is not None:
            live.queued_tokens = max(0.0, live.queued_tokens - _uncached(prompt_tokens, cached_tokens))

    def start_prefill_leg(self, backend_id: str, prompt_tokens: int) -> None:
        """A PD prefill leg sent to ``backend_id``: in flight there, its prompt queued as prefill work."""
        self.start(backend_id, prompt_tokens, PREFILL_LEG_OUTPUT)

    def finish_prefill_leg(self, backend_id: str, prompt_tokens: int) -> None:
        """That leg ended, whichever way (answered, failed, or dropped with its request)."""
        self.finish(backend_id, prompt_tokens, PREFILL_LEG_OUTPUT, got_first=False)

    def finish(
        self,
        backend_id: str,
        prompt_tokens: int,
        expected_tokens: int,
        *,
        got_first: bool,
        cached_tokens: int = 0,
    ) -> None:
        live = self._counted(backend_id)
        if live is None:
            return
        live.inflight = max(0, live.inflight - 1)
        if not got_first:
            live.queued_tokens = max(0.0, live.queued_tokens - _uncached(prompt_tokens, cached_tokens))
        live.inflight_tokens = max(0.0, live.inflight_tokens - prompt_tokens - expected_tokens)
        if not live.inflight and self._departed.get(backend_id) is live:
            del self._departed[backend_id]

    def _counted(self, backend_id: str) -> _Live | None:
        """Where ``backend_id``'s requests in flight are counted: the backend, or what is left of it."""
        return self._live.get(backend_id) or self._departed.get(backend_id)

    def inflight(self, backend_id: str) -> int:
        live = self._live.get(backend_id)
        return live.inflight if live else 0

    # the frozen view ------------------------------------------------------------------------------------
    def snapshot(self, now: float) -> Snapshot:
        backends = []
        states = {}
        for bid, live in self._live.items():
            b = live.backend
            if b.ejected != live.health.ejected:
                b = live.backend = replace(b, ejected=live.health.ejected)
            backends.append(b)
            age = now - live.scraped_at if live.scraped_at is not None else float("inf")
            states[bid] = BackendState(
                signals=live.signals,
                signals_age_s=age,
                inflight=live.inflight,
                queued_tokens=live.queued_tokens,
                inflight_tokens=live.inflight_tokens,
            )
        return Snapshot(backends=tuple(backends), states=states, now=now)

    def describe(self, now: float) -> list[dict[str, object]]:
        """Plain data for the admin API and `infctl status`."""
        out: list[dict[str, object]] = []
        for bid, live in self._live.items():
            b, h, s = live.backend, live.health, live.signals
            out.append(
                {
                    "id": bid,
                    "url": b.url,
                    "role": b.role,
                    "group": b.group,
                    "pool": b.pool,
                    "upstream": b.upstream,
                    "dp_rank": b.dp_rank,
                    "dp_size": b.dp_size,
                    "dp_size_given": live.given_dp_size,
                    "dp_size_engine": self._engine_ranks.get(b.url) if b.dp_rank is not None else None,
                    "healthy": b.healthy,
                    "bootstrap_port": b.bootstrap_port,
                    "decode_can_prefill": b.decode_can_prefill if b.role == "decode" else None,
                    "weight": b.weight,
                    "draining": b.draining,
                    "ejected": h.ejected,
                    "ejections": h.total_ejections,
                    "last_error": h.last_error,
                    "inflight": live.inflight,
                    "served": live.served,
                    "failed": live.failed,
                    "signals_age_s": None if live.scraped_at is None else round(now - live.scraped_at, 3),
                    "queue": None if s is None else s.queue,
                    "running": None if s is None else s.running,
                    "kv_usage": None if s is None else s.kv_usage,
                }
            )
        return out

    def _get(self, backend_id: str) -> _Live:
        try:
            return self._live[backend_id]
        except KeyError:
            raise KeyError(f"unknown backend {backend_id!r}") from None


def _with_ranks(backend: Backend, ranks: int | None) -> Backend:
    """``backend`` with its engine's rank count, when it pins a rank and the count is known."""
    if ranks is None or backend.dp_rank is None:
        return backend
    return replace(backend, dp_size=ranks, healthy=backend.dp_rank < ranks)


def _uncached(prompt_tokens: int, cached_tokens: int) -> int:
    return max(0, prompt_tokens - cached_tokens)
