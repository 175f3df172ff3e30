"""Load estimates shared by scorers, gates, bucketing and PD pairing.

The router's own counters (in flight, queued tokens) are always fresh; engine signals cover traffic from other
router replicas but lag. Each estimate takes the larger of the two, and ignores engine signals that are stale.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from infctl.router.settings import PolicySettings
from infctl.router.snapshot import BackendState, Snapshot

_IDLE = BackendState()


def request_load(state: BackendState, settings: PolicySettings) -> float:
    """Requests on the backend: running + waiting as the engine reports them, or this router's in-flight
    count."""
    load = float(state.inflight)
    sig = state.signals
    if sig is not None and state.signals_age_s <= settings.stale_after_s:
        load = max(load, sig.running + sig.queue)
    return load


def prefill_tokens(state: BackendState, settings: PolicySettings) -> float:
    """Prompt tokens waiting to be prefilled."""
    tokens = state.queued_tokens
    sig = state.signals
    if sig is not None and state.signals_age_s <= settings.stale_after_s:
        tokens = max(tokens, sig.queue * settings.queued_request_tokens)
    return tokens


def decode_tokens(state: BackendState, settings: PolicySettings) -> float:
    """Context tokens held by running requests (the decode load): KV in use, or this router's estimate."""
    tokens = state.inflight_tokens
    sig = state.signals
    if sig is not None and sig.cache_capacity_tokens and state.signals_age_s <= settings.stale_after_s:
        tokens = max(tokens, sig.kv_usage * sig.cache_capacity_tokens)
    return tokens


def request_loads(snapshot: Snapshot, cands: Sequence[str], settings: PolicySettings) -> list[float]:
    """``request_load`` per unit of weight for each candidate (one tight loop: this runs per request)."""
    limit, states, by_id = settings.stale_after_s, snapshot.states, snapshot.by_id
    out: list[float] = []
    for c in cands:
        st = states.get(c, _IDLE)
        load = float(st.inflight)
        sig = st.signals
        if sig is not None and st.signals_age_s <= limit:
            load = max(load, sig.running + sig.queue)
        out.append(load / by_id[c].weight)
    return out


def token_loads(
    snapshot: Snapshot, cands: Sequence[str], settings: PolicySettings
) -> tuple[list[float], list[float]]:
    """(``prefill_tokens``, ``decode_tokens``) for each candidate, not divided by weight."""
    limit, states, per_req = settings.stale_after_s, snapshot.states, settings.queued_request_tokens
    prefill: list[float] = []
    decode: list[float] = []
    for c in cands:
        st = states.get(c, _IDLE)
        p, d = st.queued_tokens, st.inflight_tokens
        sig = st.signals
        if sig is not None and st.signals_age_s <= limit:
            p = max(p, sig.queue * per_req)
            if sig.cache_capacity_tokens:
                d = max(d, sig.kv_usage * sig.cache_capacity_tokens)
        prefill.append(p)
        decode.append(d)
    return prefill, decode


def saturation(state: BackendState, settings: PolicySettings) -> float:
    """llm-d's saturation max(queue/Q, kv/K): >= 1 is saturated. Stale signals count as saturated."""
    sig = state.signals
    if sig is None or state.signals_age_s > settings.stale_after_s:
        return math.inf
    return max(sig.queue / settings.saturation_queue, sig.kv_usage / settings.saturation_kv)


def min_max_scores(values: list[float]) -> list[float]:
    """Lower is better -> (max - v) / (max - min) in [0, 1]; all equal -> 1; infinite -> 0."""
    finite = [v for v in values if v != math.inf]
    if not finite:
        return [0.0] * len(values)
    lo, hi = min(finite), max(finite)
    if hi <= lo:
        return [1.0 if v != math.inf else 0.0 for v in values]
    span = hi - lo
    return [(hi - v) / span if v != math.inf else 0.0 for v in values]
