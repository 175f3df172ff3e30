"""Filters: which backends may take the request. Each is pure: (context, candidates) -> kept candidates.

Hard filters (health, role, model) fail the request when nothing passes; soft ones (freshness, saturation, the
load gate) step aside instead, because a slow answer beats none.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from infctl.errors import ConfigError
from infctl.router.policies.load import request_loads, saturation
from infctl.router.policies.types import Candidates, Context, Filter, FilterFn


def _healthy(ctx: Context, cands: Candidates) -> Candidates:
    by_id = ctx.snapshot.by_id
    return tuple([c for c in cands if by_id[c].routable])


def _fresh(ctx: Context, cands: Candidates) -> Candidates:
    limit = ctx.settings.stale_after_s
    states = ctx.snapshot.states
    return tuple(
        [
            c
            for c in cands
            if (st := states.get(c)) is not None and st.signals is not None and st.signals_age_s <= limit
        ]
    )


def _model(ctx: Context, cands: Candidates) -> Candidates:
    model = ctx.request.model
    by_id = ctx.snapshot.by_id
    return tuple(c for c in cands if not model or not by_id[c].models or model in by_id[c].models)


def _not_saturated(ctx: Context, cands: Candidates) -> Candidates:
    return tuple(c for c in cands if saturation(ctx.snapshot.state(c), ctx.settings) < 1.0)


def load_limit(loads: list[float], gate_abs: float, gate_ratio: float, sigmas: float, slack: float) -> float:
    """Highest load still allowed to compete on cache affinity.

    Imbalanced (SGLang: max - min > gate_abs and max > gate_ratio * min): only near-least-loaded backends.
    Otherwise (AIBrix): mean + sigmas * stddev. ``slack`` keeps one request of noise from excluding anyone.
    """
    lo, hi = min(loads), max(loads)
    if hi - lo > gate_abs and hi > gate_ratio * lo:
        return lo + slack
    mean = sum(loads) / len(loads)
    std = math.sqrt(sum((x - mean) ** 2 for x in loads) / len(loads))
    return mean + sigmas * std + slack


def _load_gate(ctx: Context, cands: Candidates) -> Candidates:
    if len(cands) < 2:
        return cands
    s = ctx.settings
    loads = request_loads(ctx.snapshot, cands, s)
    limit = load_limit(loads, s.gate_abs, s.gate_ratio, s.band_sigmas, s.band_slack)
    return tuple(c for c, load in zip(cands, loads, strict=True) if load <= limit)


def _role(params: Mapping[str, Any], path: str) -> Filter:
    if set(params) - {"roles"}:
        raise ConfigError(f"{path}: filter 'role' takes only 'roles', got {sorted(params)}")
    roles = params.get("roles", ["both"])
    if isinstance(roles, str):
        roles = [roles]
    bad = [r for r in roles if r not in ("prefill", "decode", "both")]
    if bad or not roles:
        raise ConfigError(f"{path}.roles: expected prefill, decode or both, got {roles!r}")
    allowed = frozenset(roles)

    def fn(ctx: Context, cands: Candidates) -> Candidates:
        # A request routed here is sent whole: a decode engine that cannot prefill (SGLang) would refuse it.
        by_id = ctx.snapshot.by_id
        return tuple(
            [
                c
                for c in cands
                if (b := by_id[c]).role in allowed and (b.role != "decode" or b.decode_can_prefill)
            ]
        )

    return Filter("role", fn)


FilterFactory = Callable[[Mapping[str, Any], str], Filter]


def _plain(name: str, fn: FilterFn, *, soft: bool = False) -> FilterFactory:
    def factory(params: Mapping[str, Any], path: str) -> Filter:
        if params:
            raise ConfigError(f"{path}: filter {name!r} takes no parameters, got {sorted(params)}")
        return Filter(name, fn, soft=soft)

    return factory


FILTERS: dict[str, FilterFactory] = {
    "healthy": _plain("healthy", _healthy),
    "fresh": _plain("fresh", _fresh, soft=True),
    "model": _plain("model", _model),
    "role": _role,
    "not_saturated": _plain("not_saturated", _not_saturated, soft=True),
    "load_gate": _plain("load_gate", _load_gate, soft=True),
}
"""Filter name -> factory(params, key path). ``healthy`` and ``fresh`` are always applied first."""
