"""What-if replay: a request trace through a RouterCore against a fluid model of engine load.

Not an engine simulator (that is ``infctl.sim``): each backend is a FIFO prefill queue drained at a fixed
token rate, requests then decode for ``output_tokens x tpot``, and its prefix cache is an LRU of block hashes
sized like the engine's (the approximate index, used here as ground truth; with ``engine_cache`` it is filled
as the sim's engines fill theirs). It answers "does this policy pile
work onto one backend, and what hit rate does it get" in well under a second and deterministically, which is
what the hot-prefix tests and ``benchmarks/bench_policies.py`` need. Engine signals are always fresh (age 0).
"""

from __future__ import annotations

import heapq
import random
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from infctl.router.core import RouterCore
from infctl.router.prefix_index import ApproxPrefixIndex
from infctl.router.snapshot import Backend, BackendState, RequestInfo, Snapshot
from infctl.telemetry.kv_events import BlockRemoved, BlockStored
from infctl.telemetry.signals import EngineSignals

_UNIQUE = 1 << 64
"""Hashes from here up stand for blocks only one request has (its output): never published as events."""


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


@dataclass(frozen=True, slots=True)
class TraceRequest:
    arrival: float
    """Seconds from the start of the trace."""
    request: RequestInfo
    output_tokens: int = 128


@dataclass(frozen=True, slots=True)
class FluidModel:
    prefill_tokens_per_s: float = 10_000.0
    """Prefill throughput of one backend (tokens/s)."""
    tpot_s: float = 0.02
    """Seconds per output token once prefill is done."""
    cache_tokens: int = 200_000
    """Prefix-cache capacity of one backend (tokens); also reported as the engine's cache size."""
    engine_cache: bool = False
    """Model the cache as ``infctl sim``'s engines (vLLM's block pool) keep it, instead of "a request's
    prompt blocks are cached the moment it is routed": blocks become visible when the prefill that computes
    them ends (to later requests on that engine's FIFO queue as well), output blocks are cached too (unique
    to their request, they take room and evict), and a request's blocks become least-recently-used when it
    finishes (freed last block first). What bench_router's engines do, so the replay predicts their hit
    rate rather than the router index's own belief."""


@dataclass(slots=True)
class ReplayResult:
    hit_blocks: int = 0
    prompt_blocks: int = 0
    best_blocks: int = 0
    """Prompt blocks the best-stocked backend held for each request: the hits a router that always chose it
    would have had (given this run's placements), the ceiling of ``hit_blocks``."""
    prefill_tokens: Counter[str] = field(default_factory=Counter)
    """Uncached prompt tokens each backend had to compute (its prefill work)."""
    requests: Counter[str] = field(default_factory=Counter)
    reasons: Counter[str] = field(default_factory=Counter)
    ttft_s: list[float] = field(default_factory=list)
    """Queueing + prefill time per request, in arrival order."""

    @property
    def hit_rate(self) -> float:
        """Prompt blocks already cached on the chosen backend / prompt blocks."""
        return self.hit_blocks / self.prompt_blocks if self.prompt_blocks else 0.0

    @property
    def best_rate(self) -> float:
        """``best_blocks`` / prompt blocks: hit rate lost to load-balancing is ``best_rate - hit_rate``."""
        return self.best_blocks / self.prompt_blocks if self.prompt_blocks else 0.0

    def max_share(self, n_backends: int) -> float:
        """Largest backend's prefill work over the fair share (1.0 = perfectly even)."""
        total = sum(self.prefill_tokens.values())
        return max(self.prefill_tokens.values(), default=0) * n_backends / total if total else 0.0

    def ttft_quantile(self, q: float) -> float:
        ordered = sorted(self.ttft_s)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


@dataclass(slots=True)
class _Engine:
    queue_until: float = 0.0
    running: list[tuple[float, float, float]] = field(default_factory=list)
    """Heap of (finish time, context tokens, prefill done time)."""

    def state(self, now: float, model: FluidModel, block_size: int) -> BackendState:
        while self.running and self.running[0][0] <= now:
            heapq.heappop(self.running)
        waiting = sum(1 for _, _, done in self.running if done > now)
        context = sum(tokens for _, tokens, _ in self.running)
        queued = max(0.0, self.queue_until - now) * model.prefill_tokens_per_s
        signals = EngineSignals(
            queue=waiting,
            running=len(self.running) - waiting,
            kv_usage=min(1.0, context / model.cache_tokens),
            cache_capacity_tokens=model.cache_tokens,
            block_size=block_size,
        )
        return BackendState(
            signals=signals,
            signals_age_s=0.0,
            inflight=len(self.running),
            queued_tokens=queued,
            inflight_tokens=context,
        )


class Fleet:
    """The engines of one replay: their queues, their true caches, and the account of what each did.

    A chooser (a RouterCore in ``replay``, the full-knowledge baseline in ``infctl.router.oracle``) reads it
    and names a backend; ``dispatch`` then charges the request to that backend.
    """

    def __init__(self, backends: Sequence[Backend], model: FluidModel) -> None:
        self.backends = tuple(backends)
        self.model = model
        self.engines = {b.id: _Engine() for b in backends}
        self.truth = ApproxPrefixIndex()
        """What each engine really caches (an LRU of its cache size)."""
        self.result = ReplayResult()
        self._events: list[tuple[float, int, str, tuple[object, ...]]] = []
        """KV event batches not yet delivered: (time the engine publishes them, order, backend, events)."""
        self._order = 0
        self._cache_ops: list[tuple[float, int, str, int, tuple[int, ...]]] = []
        """``engine_cache``: cache updates due later: (time, order, backend, block size, hashes)."""
        self._computing: dict[str, list[tuple[float, tuple[int, ...]]]] = {b.id: [] for b in backends}
        """``engine_cache``: prompts queued or in prefill per engine: (prefill end, block hashes)."""
        self._unique = _UNIQUE
        """Next hash for a block no other request shares (output blocks): above every 64-bit block hash."""

    def cached(self, hashes: Sequence[int], now: float) -> dict[str, int]:
        """Backend -> leading blocks of ``hashes`` a request arriving at ``now`` finds cached there (with
        ``engine_cache``, prompts queued ahead of it on that engine count: it starts after they end)."""
        if not self.model.engine_cache:
            return self.truth.match(hashes)
        self._advance(now)
        held = self.truth.match(hashes)
        for backend, queued in self._computing.items():
            for _, other in queued:
                depth = _common_prefix(hashes, other)
                if depth > held.get(backend, 0):
                    held[backend] = depth
        return held

    def _advance(self, now: float) -> None:
        """Apply the cache changes engines have made by ``now`` (and publish them as KV events)."""
        ops = self._cache_ops
        while ops and ops[0][0] <= now:
            at, _, backend, block_size, hashes = heapq.heappop(ops)
            queued = self._computing[backend]
            while queued and queued[0][0] <= at:
                queued.pop(0)
            self._store(backend, hashes, block_size, at)

    def _store(self, backend: str, hashes: Sequence[int], block_size: int, at: float) -> None:
        """``backend`` caches ``hashes`` (most recent) at ``at``; its KV events are published then."""
        change = self.truth.record(backend, hashes, self.model.cache_tokens // block_size)
        events: list[object] = []
        if change.evicted:
            events.append(BlockRemoved([h for h in change.evicted if h < _UNIQUE]))
        stored = [h for h in change.added[::-1] if h < _UNIQUE]
        if stored:
            events.append(BlockStored(stored, None, [], block_size))
        if events:
            self._order += 1
            heapq.heappush(self._events, (at, self._order, backend, tuple(events)))

    def snapshot(self, now: float, block_size: int) -> Snapshot:
        states = {bid: e.state(now, self.model, block_size) for bid, e in self.engines.items()}
        return Snapshot(self.backends, states, now)

    def queue_wait_s(self, backend_id: str, now: float) -> float:
        """Seconds a prefill arriving now would wait behind the backend's queue."""
        return max(0.0, self.engines[backend_id].queue_until - now)

    def due_events(self, now: float) -> list[tuple[str, tuple[object, ...]]]:
        """KV event batches engines have published by ``now``, in publication order."""
        out: list[tuple[str, tuple[object, ...]]] = []
        while self._events and self._events[0][0] <= now:
            _, _, backend, events = heapq.heappop(self._events)
            out.append((backend, events))
        return out

    def dispatch(self, item: TraceRequest, chosen: str, reason: str) -> None:
        req, now, model = item.request, item.arrival, self.model
        held = self.cached(req.block_hashes, now)
        hit = held.get(chosen, 0)
        engine_cache = model.engine_cache
        if not engine_cache:
            change = self.truth.record(chosen, req.block_hashes, model.cache_tokens // req.block_size)
        uncached = max(0, req.prompt_tokens - hit * req.block_size)
        engine = self.engines[chosen]
        done = max(now, engine.queue_until) + uncached / model.prefill_tokens_per_s
        engine.queue_until = done
        finish = done + item.output_tokens * model.tpot_s
        context = float(req.prompt_tokens + item.output_tokens)
        heapq.heappush(engine.running, (finish, context, done))
        if engine_cache:
            self._schedule_cache(chosen, item, done, finish)
        else:
            events: list[object] = []
            if change.evicted:
                events.append(BlockRemoved(list(change.evicted)))
            if change.added:
                events.append(BlockStored(list(change.added[::-1]), None, [], req.block_size))
            if events:  # published once the prefill has computed the blocks
                self._order += 1
                heapq.heappush(self._events, (done, self._order, chosen, tuple(events)))
        r = self.result
        r.hit_blocks += hit
        r.best_blocks += max(held.values(), default=0)
        r.prompt_blocks += req.num_blocks
        r.prefill_tokens[chosen] += uncached
        r.requests[chosen] += 1
        r.reasons[reason] += 1
        r.ttft_s.append(done - now)

    def _schedule_cache(self, backend: str, item: TraceRequest, done: float, finish: float) -> None:
        """``engine_cache``: the prompt's blocks enter the cache when its prefill ends; when the request
        finishes, its blocks (output ones too) become the engine's most recently freed."""
        req = item.request
        prompt = tuple(req.block_hashes)
        n_out = (req.prompt_tokens + item.output_tokens) // req.block_size - len(prompt)
        output = tuple(range(self._unique, self._unique + max(0, n_out)))
        self._unique += len(output)
        self._computing[backend].append((done, prompt))
        self._computing[backend].sort(key=lambda x: x[0])
        for at, hashes in ((done, prompt), (finish, prompt + output)):
            self._order += 1
            heapq.heappush(self._cache_ops, (at, self._order, backend, req.block_size, hashes))

    def settle(self, now: float) -> None:
        """Apply every cache change engines have made by ``now`` (KV events then become due)."""
        if self.model.engine_cache:
            self._advance(now)


def replay(
    core: RouterCore, backends: Sequence[Backend], trace: Iterable[TraceRequest], model: FluidModel
) -> ReplayResult:
    """Route every request of ``trace`` with ``core`` and account what each backend had to do.

    A core on the precise (or auto) index receives each engine's KV events (numbered batches) once the
    prefill that caused them has finished, as a live engine publishes them.
    """
    fleet = Fleet(backends, model)
    seq: Counter[str] = Counter()
    for item in trace:
        fleet.settle(item.arrival)
        if core.policy.index in ("precise", "auto"):
            for backend, events in fleet.due_events(item.arrival):
                seq[backend] += 1
                core.apply_kv_events(backend, seq[backend], events)
        decision = core.route(fleet.snapshot(item.arrival, item.request.block_size), item.request)
        fleet.dispatch(item, decision.backend_id, decision.reason)
    return fleet.result


def hot_prefix_trace(
    n: int = 1000,
    *,
    rate: float = 40.0,
    seed: int = 0,
    block_size: int = 16,
    shared_fraction: float = 0.9,
    conversation_fraction: float = 0.5,
    system_tokens: int = 2048,
    active_conversations: int = 48,
    max_history_tokens: int = 8192,
) -> list[TraceRequest]:
    """A workload where nearly everything shares one system prompt.

    ``shared_fraction`` of requests start with the same ``system_tokens``-token prompt;
    ``conversation_fraction`` of those are turns of multi-turn conversations (each turn's prompt extends the
    previous turn's prompt and answer, so they share deeper per-conversation prefixes, and they carry the
    conversation as session key); the rest add a one-off question. The remaining requests are unrelated
    prompts. Arrivals are Poisson at ``rate`` requests/s. Deterministic for a seed.
    """
    rng = random.Random(seed)

    def words(k: int) -> list[int]:
        return [rng.getrandbits(32) for _ in range(k)]

    system = words(system_tokens)
    conversations: list[list[int]] = [[] for _ in range(active_conversations)]
    started = [0] * active_conversations
    out: list[TraceRequest] = []
    now = 0.0
    for i in range(n):
        now += rng.expovariate(rate)
        output = rng.randint(64, 256)
        r = rng.random()
        session = None
        if r >= shared_fraction:
            ids = words(rng.randint(512, 2048))
        elif r < shared_fraction * conversation_fraction:
            slot = rng.randrange(active_conversations)
            history = conversations[slot]
            if not history or len(history) > max_history_tokens:
                history = conversations[slot] = system + words(rng.randint(64, 512))
                started[slot] = i
            session = f"conv-{seed}-{slot}-{started[slot]}"
            ids = history + words(rng.randint(32, 256))
            conversations[slot] = ids + words(output)  # the answer becomes part of the next turn's prompt
        else:
            ids = system + words(rng.randint(64, 1024))
        req = RequestInfo.from_ids(
            f"req-{seed}-{i}", ids, block_size=block_size, model="m", session_key=session
        )
        out.append(TraceRequest(now, req, output))
    return out
