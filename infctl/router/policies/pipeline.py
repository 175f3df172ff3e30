"""A policy is filters -> weighted scorers -> picker, built from a plain dict (the YAML ``policy:`` section).

Config shape (every key optional; a bare string names a preset)::

    {"preset": "cache_aware",                      # start from a preset; keys below replace its keys
     "filters": ["role", {"name": "role", "roles": ["both", "decode"]}, "load_gate"],
     "scorers": [{"name": "queue", "weight": 2}, {"name": "kv_usage", "weight": 2},
                 {"name": "prefix", "weight": 3}],
     "picker": "max",                              # max | random | round_robin | power_of_two
     "index": "auto",                              # auto | approx | precise | none: where prefix matches
                                                   # come from (auto: precise for backends publishing KV
                                                   # events, approximate for the others)
     "settings": {"stale_after_s": 0.2},           # PolicySettings overrides
     "buckets": [{"name": "short", "max_tokens": 2048, "pools": ["short"]},
                 {"name": "long", "pools": ["long"]}],
     "upstreams": {"weights": {"old": 90, "new": 10}, "mirror": {"to": "shadow", "percent": 5}}}

Whatever the config, ``healthy`` (not ejected, not draining) always applies first and ``fresh`` (prefer
backends with recent signals) always applies among the soft filters, so no configuration can route to a dead
backend. Order: hard filters, upstream split, length buckets, soft filters, scorers, picker.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from infctl.errors import ConfigError
from infctl.router.errors import NoBackendError
from infctl.router.policies.buckets import BucketConfig, bucket_candidates, parse_buckets
from infctl.router.policies.filters import FILTERS
from infctl.router.policies.pickers import PICKERS
from infctl.router.policies.presets import PRESETS
from infctl.router.policies.scorers import SCORERS, shared_depth
from infctl.router.policies.types import Candidates, Context, Decision, Filter, Picker, PolicyState, Scorer
from infctl.router.policies.weights import UpstreamConfig, applied_weights, parse_upstreams, split_upstream
from infctl.router.settings import PolicySettings
from infctl.router.snapshot import RequestInfo, Snapshot

IndexKind = Literal["auto", "approx", "precise", "none"]
_HEALTHY = FILTERS["healthy"]({}, "filters")
_FRESH = FILTERS["fresh"]({}, "filters")
_LOAD_AWARE = frozenset({"load", "queue", "cost"})


@dataclass(frozen=True, slots=True)
class Policy:
    name: str
    filters: tuple[Filter, ...] = ()
    """Configured filters; hard ones run before buckets, soft ones after (healthy/fresh are implicit)."""
    scorers: tuple[Scorer, ...] = ()
    picker: Picker = PICKERS["max"]
    index: IndexKind = "none"
    settings: PolicySettings = field(default_factory=PolicySettings)
    buckets: BucketConfig | None = None
    upstreams: UpstreamConfig | None = None

    def decide(
        self,
        snapshot: Snapshot,
        request: RequestInfo,
        *,
        matches: Mapping[str, int] | None = None,
        state: PolicyState | None = None,
    ) -> Decision:
        """Choose a backend. Raises NoBackendError when a hard filter leaves nothing."""
        ctx = Context(snapshot, request, self.settings, matches or {})
        cands: Candidates = tuple(b.id for b in snapshot.backends)
        for f in (_HEALTHY, *(f for f in self.filters if not f.soft)):
            cands = f.fn(ctx, cands)
            if not cands:
                raise NoBackendError(
                    f"no backend for request {request.request_id}: none passes filter {f.name!r}",
                    reason=f"no_{f.name}",
                    hint="check backend health, roles and models (infctl doctor)",
                )
        upstream = None
        if weights := applied_weights(self.upstreams, snapshot.backends):
            upstream, cands = split_upstream(request.request_id, snapshot, cands, weights)
        bucket, priority, fallback = None, 0, False
        if self.buckets:
            choice = bucket_candidates(ctx, cands, self.buckets)
            cands, bucket, priority, fallback = (
                choice.candidates,
                choice.bucket.name,
                choice.priority,
                choice.fallback,
            )
        eligible = cands
        for f in (_FRESH, *(f for f in self.filters if f.soft)):
            kept = f.fn(ctx, cands)
            if kept:
                cands = kept
        per_scorer = [(s, s.fn(ctx, cands)) for s in self.scorers]
        totals = [0.0] * len(cands)
        for s, scores in per_scorer:
            w = s.weight
            totals = [t + w * x for t, x in zip(totals, scores, strict=True)]
        chosen = self.picker.fn(ctx, cands, totals, state if state is not None else PolicyState())
        idx = cands.index(chosen)
        return Decision(
            backend_id=chosen,
            reason=self._reason(ctx, chosen, eligible, [(s.name, sc[idx]) for s, sc in per_scorer]),
            scores=dict(zip(cands, totals, strict=True)),
            matched_blocks=ctx.matches.get(chosen, 0),
            bucket=bucket,
            priority=priority,
            fallback=fallback,
            upstream=upstream,
        )

    def _reason(self, ctx: Context, chosen: str, eligible: Candidates, own: list[tuple[str, float]]) -> str:
        if self.picker.reason:
            return self.picker.reason
        if ctx.request.session_key and ("session", 1.0) in own:
            return "session"
        names = {name for name, _ in own}
        m = ctx.matches
        if m and ("prefix" in names or "cost" in names):
            depths = [m.get(c, 0) for c in eligible]
            common = shared_depth(depths, self.settings.shared_quorum) if "cost" in names else min(depths)
            got = m.get(chosen, 0)
            if max(depths) > max(got, common):
                return "load_gate"  # a backend holding more than the shared prefix was passed over for load
            if got > common:
                return "prefix_hit"  # affinity beyond the prefix the candidates share
        if names & _LOAD_AWARE:
            return "least_load"
        if "kv_usage" in names:
            return "kv_usage"
        return "tie_break"


def build_policy(config: str | Mapping[str, Any], *, path: str = "policy") -> Policy:
    """Build a Policy from a preset name or a config dict (shape in the module docstring)."""
    if isinstance(config, str):
        config = {"preset": config}
    if not isinstance(config, Mapping):
        raise ConfigError(f"{path}: expected a preset name or a mapping")
    known = {"preset", "filters", "scorers", "picker", "index", "settings", "buckets", "upstreams"}
    unknown = sorted(set(config) - known)
    if unknown:
        raise ConfigError(f"{path}: unknown keys {unknown}", hint=f"known keys: {', '.join(sorted(known))}")
    merged: dict[str, Any] = {}
    name = config.get("preset", "custom")
    if "preset" in config:
        if name not in PRESETS:
            raise ConfigError(f"{path}.preset: unknown preset {name!r}", hint=f"one of: {', '.join(PRESETS)}")
        merged.update(PRESETS[name])
    merged.update({k: v for k, v in config.items() if k != "preset"})
    picker = merged.get("picker", "max")
    if picker not in PICKERS:
        raise ConfigError(f"{path}.picker: unknown picker {picker!r}", hint=f"one of: {', '.join(PICKERS)}")
    index = merged.get("index", "none")
    if index not in ("auto", "approx", "precise", "none"):
        raise ConfigError(f"{path}.index: expected auto, approx, precise or none, got {index!r}")
    settings_raw = merged.get("settings", {})
    if not isinstance(settings_raw, Mapping):
        raise ConfigError(f"{path}.settings: expected a mapping")
    return Policy(
        name=str(name),
        filters=tuple(_filters(merged.get("filters", []), f"{path}.filters")),
        scorers=tuple(_scorers(merged.get("scorers", []), f"{path}.scorers")),
        picker=PICKERS[picker],
        index=index,
        settings=PolicySettings().with_overrides(settings_raw, path=f"{path}.settings"),
        buckets=parse_buckets(merged["buckets"], f"{path}.buckets") if merged.get("buckets") else None,
        upstreams=parse_upstreams(merged["upstreams"], f"{path}.upstreams")
        if merged.get("upstreams")
        else None,
    )


def _entries(raw: object, path: str) -> list[tuple[str, dict[str, Any], str]]:
    if not isinstance(raw, Sequence) or isinstance(raw, str):
        raise ConfigError(f"{path}: expected a list")
    out: list[tuple[str, dict[str, Any], str]] = []
    for i, item in enumerate(raw):
        here = f"{path}[{i}]"
        if isinstance(item, str):
            out.append((item, {}, here))
        elif isinstance(item, Mapping) and isinstance(item.get("name"), str):
            out.append((item["name"], {k: v for k, v in item.items() if k != "name"}, here))
        else:
            raise ConfigError(f"{here}: expected a name or a mapping with 'name'")
    return out


def _filters(raw: object, path: str) -> list[Filter]:
    out: list[Filter] = []
    for name, params, here in _entries(raw, path):
        if name not in FILTERS:
            raise ConfigError(f"{here}.name: unknown filter {name!r}", hint=f"one of: {', '.join(FILTERS)}")
        if name not in ("healthy", "fresh"):  # always applied; listing them is harmless
            out.append(FILTERS[name](params, here))
    return out


def _scorers(raw: object, path: str) -> list[Scorer]:
    out: list[Scorer] = []
    for name, params, here in _entries(raw, path):
        if name not in SCORERS:
            raise ConfigError(f"{here}.name: unknown scorer {name!r}", hint=f"one of: {', '.join(SCORERS)}")
        weight = params.pop("weight", 1.0)
        if isinstance(weight, bool) or not isinstance(weight, int | float) or weight < 0:
            raise ConfigError(f"{here}.weight: expected a non-negative number, got {weight!r}")
        out.append(Scorer(name, SCORERS[name](params, here), float(weight)))
    return out
