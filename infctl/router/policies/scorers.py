"""Scorers: how much each candidate suits the request, in [0, 1] (1 best). Pure: (context, candidates) ->
scores."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from infctl.errors import ConfigError
from infctl.router.hashing import rendezvous, stable_hash
from infctl.router.policies.load import (
    decode_tokens,
    min_max_scores,
    prefill_tokens,
    request_loads,
    token_loads,
)
from infctl.router.policies.types import Candidates, Context, ScoreFn


def queue(ctx: Context, cands: Candidates) -> Sequence[float]:
    """llm-d's queue scorer: (maxQ - q) / (maxQ - minQ) over engine-reported waiting requests; stale -> 0."""
    limit, state = ctx.settings.stale_after_s, ctx.snapshot.state
    values: list[float] = []
    for c in cands:
        st = state(c)
        sig = st.signals
        values.append(sig.queue if sig is not None and st.signals_age_s <= limit else math.inf)
    return min_max_scores(values)


def kv_usage(ctx: Context, cands: Candidates) -> Sequence[float]:
    """1 - KV-cache usage; stale -> 0 (saturated)."""
    limit, state = ctx.settings.stale_after_s, ctx.snapshot.state
    out: list[float] = []
    for c in cands:
        st = state(c)
        sig = st.signals
        free = 1.0 - sig.kv_usage if sig is not None and st.signals_age_s <= limit else 0.0
        out.append(min(1.0, max(0.0, free)))
    return out


def load(ctx: Context, cands: Candidates) -> Sequence[float]:
    """Least requests per unit of weight (running + waiting, or this router's in-flight count), min-max
    scaled."""
    return min_max_scores(request_loads(ctx.snapshot, cands, ctx.settings))


def prefix(ctx: Context, cands: Candidates) -> Sequence[float]:
    """Fraction of the request's blocks the candidate already holds (matched_blocks / request_blocks)."""
    n = ctx.request.num_blocks
    if n == 0:
        return [0.0] * len(cands)
    m = ctx.matches
    return [m.get(c, 0) / n for c in cands]


def shared_depth(depths: Sequence[int], quorum: float) -> int:
    """Prefix depth (blocks) that at least ``quorum`` of the candidates, and at least two, already hold.

    Such a prefix (typically the system prompt) is a commodity: it is no reason to prefer a backend, and a
    backend lacking it will cache it on first use. Treating it as held everywhere is what lets a hot prefix
    replicate instead of pinning its traffic to the few backends that happened to see it first.
    """
    if len(depths) < 2:
        return 0
    k = min(len(depths), max(2, math.ceil(quorum * len(depths))))
    return sorted(depths, reverse=True)[k - 1]


def prefill_cost(ctx: Context, backend_id: str, shared: int = 0) -> float:
    """Prefill tokens (uncached prompt + queue) per unit of weight: the wait for this request's first token.
    ``shared`` blocks count as cached everywhere (see ``shared_depth``)."""
    req = ctx.request
    held = max(ctx.matches.get(backend_id, 0), shared)
    uncached = max(0, req.prompt_tokens - held * req.block_size)
    queued = prefill_tokens(ctx.snapshot.state(backend_id), ctx.settings)
    return (uncached + ctx.settings.cost_queue_weight * queued) / ctx.snapshot.by_id[backend_id].weight


def total_cost(ctx: Context, backend_id: str, shared: int = 0) -> float:
    """Dynamo-style cost in token units: weighted prefill tokens plus weighted decode (in-flight context)."""
    s = ctx.settings
    decode = decode_tokens(ctx.snapshot.state(backend_id), s) / ctx.snapshot.by_id[backend_id].weight
    return s.cost_prefill_weight * prefill_cost(ctx, backend_id, shared) + s.cost_decode_weight * decode


@dataclass(frozen=True, slots=True)
class CostParams:
    """Parameters of the ``cost`` scorer (``{"name": "cost", "duplicate_weight": 1.0}`` in a policy)."""

    duplicate_weight: float = 1.0
    """Extra weight, in prefill tokens per token, of recomputing blocks that exactly one other candidate
    holds (beyond what two or more hold). Such a recompute costs twice: its own prefill, and the cached
    block it evicts on the target for the copy, which some later request will recompute. Blocks two or
    more candidates hold are a replicated (hot) prefix: copying them further spreads its load, so they
    carry no extra weight and a hot prefix still fans out. 0 gives the plain Dynamo-style cost.
    Measured with benchmarks/bench_router_sim.py (bench_router's runs on the virtual clock, medians of 5
    scrape-interval variants): Mooncake x8 hit rate 35.8% -> 36.9% (spreads 35.4-36.0 and 36.6-36.9),
    TTFT p50 21.9 -> 21.0 ms, p99 283 -> 282 ms, shared prefixes unchanged (81.5%); the hot-prefix
    replay keeps every engine within 1.38x its fair share of prefill (1.06 / 1.38 / 1.29 at 10 / 40 / 80
    req/s, was 1.09 / 1.16 / 1.32). Counting every recomputed block twice (not only those one candidate
    holds) gains the same on Mooncake but piles the hot prefix 1.87x at 10 req/s."""


def cost_scorer(params: CostParams) -> ScoreFn:
    """cache_aware's scorer: lowest total cost scores 1. Only affinity beyond the shared prefix counts;
    blocks only one candidate holds weigh ``1 + duplicate_weight`` on the others (see ``CostParams``)."""
    wdup = params.duplicate_weight

    def cost(ctx: Context, cands: Candidates) -> Sequence[float]:
        s, req, m, by_id = ctx.settings, ctx.request, ctx.matches, ctx.snapshot.by_id
        shared = shared_depth([m.get(c, 0) for c in cands], s.shared_quorum) if m else 0
        held = [max(m.get(c, 0), shared) for c in cands]
        best = second = 0
        if wdup and m:
            for h in held:
                if h > best:
                    best, second = h, best
                elif h > second:
                    second = h
        prefill, decode = token_loads(ctx.snapshot, cands, s)
        prompt, block, wp, wd = req.prompt_tokens, req.block_size, s.cost_prefill_weight, s.cost_decode_weight
        wq = s.cost_queue_weight
        costs = [
            (
                wp * (max(0, prompt - h * block) + wdup * max(0, best - max(h, second)) * block + wq * q)
                + wd * d
            )
            / by_id[c].weight
            for c, h, q, d in zip(cands, held, prefill, decode, strict=True)
        ]
        return min_max_scores(costs)

    return cost


cost = cost_scorer(CostParams())
"""``cost`` with the default ``CostParams``."""


def session(ctx: Context, cands: Candidates) -> Sequence[float]:
    """1 for the rendezvous-hash owner of the session key among the candidates, else 0.

    Rendezvous hashing needs no table: every replica computes the same owner, and when a backend leaves only
    its own sessions move. Weighted: P(owner) is proportional to the backend weight.
    """
    key = ctx.request.session_key
    if not key or not cands:
        return [0.0] * len(cands)
    backends = [ctx.snapshot.by_id[c] for c in cands]
    owner = rendezvous(stable_hash(key, "session"), [b.key for b in backends], [b.weight for b in backends])
    out = [0.0] * len(cands)
    if owner >= 0:
        out[owner] = 1.0
    return out


ScorerFactory = Callable[[Mapping[str, Any], str], ScoreFn]


def _plain(fn: ScoreFn) -> ScorerFactory:
    def factory(params: Mapping[str, Any], path: str) -> ScoreFn:
        if params:
            raise ConfigError(f"{path}: scorer takes only 'weight', got {sorted(params)}")
        return fn

    return factory


def _cost(params: Mapping[str, Any], path: str) -> ScoreFn:
    unknown = sorted(set(params) - {"duplicate_weight"})
    if unknown:
        raise ConfigError(f"{path}: the cost scorer takes 'weight' and 'duplicate_weight', got {unknown}")
    if "duplicate_weight" not in params:
        return cost
    w = params["duplicate_weight"]
    if isinstance(w, bool) or not isinstance(w, int | float) or not 0 <= w < math.inf:
        raise ConfigError(f"{path}.duplicate_weight: expected a non-negative number, got {w!r}")
    return cost_scorer(CostParams(float(w)))


SCORERS: Mapping[str, ScorerFactory] = {
    "queue": _plain(queue),
    "kv_usage": _plain(kv_usage),
    "load": _plain(load),
    "prefix": _plain(prefix),
    "cost": _cost,
    "session": _plain(session),
}
"""Scorer name -> factory(params, key path)."""
