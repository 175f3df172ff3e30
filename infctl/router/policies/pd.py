"""Prefill/decode pairing for disaggregated serving.

Group mode (prefill and decode engines share a fast interconnect inside a group): the decode backend is chosen
first, by its decode load plus the cost of the best prefill its group offers (the prefill engines hold the
prefix cache, so affinity is scored on that side); then the cheapest prefill of that same group. Pool mode:
the cheapest prefill is chosen on its own, and a decode candidate outside its group pays ``cross_group_cost``
per token of KV it must receive over the slower link between groups. Either way the request is disaggregated
only when the part of the prompt the decode backend has not cached exceeds ``min_uncached_tokens`` and a
prefill backend exists; otherwise a backend that can prefill (role ``both``, or a decode engine that can run
a short prefill itself) does the whole request.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from infctl.errors import ConfigError
from infctl.router.errors import NoBackendError
from infctl.router.policies.buckets import BucketConfig, bucket_candidates
from infctl.router.policies.filters import FILTERS
from infctl.router.policies.load import decode_tokens
from infctl.router.policies.pickers import tie_break
from infctl.router.policies.scorers import prefill_cost
from infctl.router.policies.types import Candidates, Context
from infctl.router.policies.weights import UpstreamConfig, applied_weights, split_upstream
from infctl.router.settings import PolicySettings
from infctl.router.snapshot import RequestInfo, Snapshot

_GATE = FILTERS["load_gate"]({}, "pd")
_FRESH = FILTERS["fresh"]({}, "pd")
_MODEL = FILTERS["model"]({}, "pd")


@dataclass(frozen=True, slots=True)
class PDSettings:
    mode: Literal["group", "pool"] = "group"
    """``group``: prefill and decode from the same group; ``pool``: chosen independently."""
    min_uncached_tokens: int = 512
    """Disaggregate only when more prompt tokens than this are uncached on the decode backend (tokens)."""
    cross_group_cost: float = 0.108
    """Pool mode: prefill-token equivalents added per transferred token (the prompt tokens the decode backend
    has not cached) to a decode backend outside the chosen prefill backend's group, for the slower KV link
    between groups; weighted like prefill tokens (``cost_prefill_weight``). Applies only to a disaggregated
    pair whose backends both have a group; 0 disables it (decode chosen regardless of the link).
    Default: the extra transfer time over one prefilled token on DeepSeek-V3 H200 nodes, the simulator's
    ``deepseek-v3-h200-*`` profiles: 70,272 KV bytes/token x (1/25 - 1/50 GB/s) = 1.41 us per token across
    the spine (half the 50 GB/s group link) against 13 us of prefill compute per prompt token = 0.108.
    For other hardware: ``kv_bytes_per_token x (1/cross_bw - 1/group_bw) / prefill seconds per token``."""

    def __post_init__(self) -> None:
        if not self.cross_group_cost >= 0:  # also rejects NaN
            raise ConfigError(
                f"pd cross_group_cost must be >= 0 (prefill tokens per token), got {self.cross_group_cost}",
                hint="0 disables it; 0.108 is the default",
            )


@dataclass(frozen=True, slots=True)
class PDDecision:
    decode: str
    prefill: str | None
    """None: the decode backend runs the whole request (no KV transfer)."""
    reason: str
    """``disaggregated``, ``local_prefill`` (short uncached prompt) or ``no_prefill_backend``."""
    group: str | None = None
    costs: Mapping[str, float] = field(default_factory=dict)
    """Decode candidates' costs (token units), for the decision log."""


def pick_pd(
    snapshot: Snapshot,
    request: RequestInfo,
    *,
    matches: Mapping[str, int] | None = None,
    settings: PolicySettings | None = None,
    pd: PDSettings | None = None,
    upstreams: UpstreamConfig | None = None,
    buckets: BucketConfig | None = None,
) -> PDDecision:
    """Choose the (prefill, decode) pair for ``request``; raises NoBackendError when no decode backend is
    up. With upstream groups (weighted, or split by capacity: ``applied_weights``) both legs come from the
    request's group (as a cutover moves it), so a pair never spans the old and the new system."""
    pd = pd or PDSettings()
    ctx = Context(snapshot, request, settings or PolicySettings(), matches or {})
    live = tuple(b.id for b in snapshot.backends if b.routable)
    live = _MODEL.fn(ctx, live)
    live = _FRESH.fn(ctx, live) or live
    by_id = snapshot.by_id
    if weights := applied_weights(upstreams, snapshot.backends):
        _, live = split_upstream(
            request.request_id,
            snapshot,
            live,
            weights,
            usable=lambda kept: any(by_id[c].role in ("decode", "both") for c in kept),
        )
    decoders = tuple(c for c in live if by_id[c].role in ("decode", "both"))
    # An aggregated engine runs no KV connector or bootstrap server (launch_command gives it none): it is
    # never the prefill leg of another backend's request.
    prefillers = tuple(c for c in live if by_id[c].role == "prefill")
    if buckets is not None and decoders:
        # A length pool holds both legs: decode from the request's bucket (or where it may spill), prefill
        # from the same pools, unless none of them has a prefill engine up (availability beats isolation).
        decoders = bucket_candidates(ctx, decoders, buckets).candidates
        pools = {by_id[d].pool for d in decoders}
        prefillers = tuple(p for p in prefillers if by_id[p].pool in pools) or prefillers
    if not decoders:
        raise NoBackendError(
            f"no decode backend for request {request.request_id}",
            reason="no_decode",
            hint="check decode health",
        )
    decoders = _GATE.fn(ctx, decoders) or decoders
    cheapest: dict[str | None, str | None] = {}  # per group (pool mode: one shared entry)
    costs: dict[str, float] = {}
    plans: dict[str, tuple[str, str]] = {}
    for d in decoders:
        group = by_id[d].group if pd.mode == "group" else None
        if group not in cheapest:
            side = (
                prefillers if pd.mode == "pool" else tuple(p for p in prefillers if by_id[p].group == group)
            )
            cheapest[group] = _cheapest_prefill(ctx, side)
        plan, why = cheapest[group], "disaggregated"
        prefill_part = prefill_cost(ctx, plan) if plan else math.inf
        if _can_prefill(ctx, d):
            if _uncached(ctx, d) <= pd.min_uncached_tokens:
                plan, why, prefill_part = d, "local_prefill", prefill_cost(ctx, d)
            elif plan is None:
                plan, why, prefill_part = d, "no_prefill_backend", prefill_cost(ctx, d)
        if plan is None:
            continue
        s = ctx.settings
        if plan != d:
            prefill_part += _link_cost(ctx, pd, plan, d)
        decode_part = decode_tokens(snapshot.state(d), s) / by_id[d].weight
        costs[d] = s.cost_prefill_weight * prefill_part + s.cost_decode_weight * decode_part
        plans[d] = (plan, "local_prefill" if plan == d and why == "disaggregated" else why)
    if not costs:
        raise NoBackendError(
            f"no prefill backend for request {request.request_id}",
            reason="no_prefill",
            hint="start prefill backends or let decode engines prefill",
        )
    best = min(costs.values())
    decode = tie_break(ctx, [d for d, c in costs.items() if c <= best + 1e-9 * max(1.0, best)])
    prefill, reason = plans[decode]
    return PDDecision(decode, None if prefill == decode else prefill, reason, by_id[decode].group, costs)


def _cheapest_prefill(ctx: Context, cands: Candidates) -> str | None:
    if not cands:
        return None
    cands = _GATE.fn(ctx, cands) or cands
    costs = [prefill_cost(ctx, c) for c in cands]
    best = min(costs)
    return tie_break(ctx, [c for c, v in zip(cands, costs, strict=True) if v <= best + 1e-9 * max(1.0, best)])


def _link_cost(ctx: Context, pd: PDSettings, prefill: str, decode: str) -> float:
    """Extra prefill-token equivalents of moving the KV from ``prefill`` to ``decode`` across groups."""
    pg, dg = ctx.snapshot.by_id[prefill].group, ctx.snapshot.by_id[decode].group
    if not pd.cross_group_cost or pg is None or dg is None or pg == dg:
        return 0.0
    return pd.cross_group_cost * _uncached(ctx, decode)


def _can_prefill(ctx: Context, backend_id: str) -> bool:
    b = ctx.snapshot.by_id[backend_id]
    return b.role == "both" or (b.role == "decode" and b.decode_can_prefill)


def _uncached(ctx: Context, backend_id: str) -> int:
    req = ctx.request
    return max(0, req.prompt_tokens - ctx.matches.get(backend_id, 0) * req.block_size)
