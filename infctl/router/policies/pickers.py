"""Pickers: choose one candidate from the weighted scores.

Every random-looking choice is seeded from the request id and keyed by backend id, never by list position, so
two router replicas with the same snapshot pick the same backend even if they list the backends in another
order.
"""

from __future__ import annotations

from collections.abc import Sequence

from infctl.router.hashing import mix, rendezvous
from infctl.router.policies.types import Candidates, Context, Picker, PolicyState

_EPS = 1e-9


def tie_break(ctx: Context, cands: Sequence[str]) -> str:
    """The candidate with the highest hash of (request id, backend id): spreads ties, identical on every
    replica."""
    rk = ctx.request.key
    by_id = ctx.snapshot.by_id
    return max(cands, key=lambda c: mix(rk, by_id[c].key))


def pick_max(ctx: Context, cands: Candidates, totals: Sequence[float], state: PolicyState) -> str:
    best = max(totals)
    floor = best - _EPS * max(1.0, abs(best))
    tied = [c for c, t in zip(cands, totals, strict=True) if t >= floor]
    return tied[0] if len(tied) == 1 else tie_break(ctx, tied)


def pick_random(ctx: Context, cands: Candidates, totals: Sequence[float], state: PolicyState) -> str:
    """Weighted random: P proportional to score x backend weight (all scores zero: to weight alone), drawn by
    weighted rendezvous hashing of the request id, so no candidate order is involved."""
    backends = [ctx.snapshot.by_id[c] for c in cands]
    weights = [max(0.0, t) * b.weight for b, t in zip(backends, totals, strict=True)]
    if sum(weights) <= 0:
        weights = [b.weight for b in backends]
    i = rendezvous(ctx.request.key, [b.key for b in backends], weights)
    return cands[max(i, 0)]


def pick_round_robin(ctx: Context, cands: Candidates, totals: Sequence[float], state: PolicyState) -> str:
    choice = cands[state.cursor % len(cands)]
    state.cursor += 1
    return choice


def pick_two(ctx: Context, cands: Candidates, totals: Sequence[float], state: PolicyState) -> str:
    """Power of two choices: two candidates drawn from the request id, the better-scored one wins."""
    if len(cands) < 3:
        return pick_max(ctx, cands, totals, state)
    rk = ctx.request.key
    by_id = ctx.snapshot.by_id
    ranked = sorted(range(len(cands)), key=lambda i: mix(rk, by_id[cands[i]].key), reverse=True)[:2]
    a, b = ranked
    return cands[b] if totals[b] > totals[a] + _EPS else cands[a]


PICKERS: dict[str, Picker] = {
    "max": Picker("max", pick_max),
    "random": Picker("random", pick_random, reason="random"),
    "round_robin": Picker("round_robin", pick_round_robin, reason="round_robin"),
    "power_of_two": Picker("power_of_two", pick_two, reason="power_of_two"),
}
