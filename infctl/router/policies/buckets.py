"""Length bucketing: keep short requests away from long ones by sending each length bucket to its own pools.

Buckets are ordered by prompt length; the first is the most urgent (``Decision.priority`` 0), so admission
control can serve short requests first. When a bucket's pools are saturated its requests may spill into the
pools of the buckets named in ``spill_to`` (default: the buckets of longer prompts, since a long prompt
dropped into a short pool stalls every short request batched behind its prefill, the very thing buckets
exist to prevent, while a short prompt in a long pool only delays itself). Spilling needs evidence: the own
pool must be saturated by fresh engine signals and the target free by fresh ones. Stale signals (a slow
scrape on a busy machine) keep the request home: live, treating them as saturated sent long documents into
the short pool. When its pools are empty (none healthy) any backend takes them: availability beats isolation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

from infctl.errors import ConfigError
from infctl.router.policies.load import saturation
from infctl.router.policies.types import Candidates, Context
from infctl.router.settings import PolicySettings
from infctl.router.snapshot import BackendState


@dataclass(frozen=True, slots=True)
class Bucket:
    name: str
    max_tokens: int | None
    """Largest prompt (tokens, inclusive) in this bucket; None for the last, unbounded one."""
    pools: tuple[str, ...]
    spill_to: tuple[str, ...] | None = None
    """Buckets whose pools may take this bucket's requests when its own are saturated; None = the buckets
    after this one (longer prompts)."""


@dataclass(frozen=True, slots=True)
class BucketConfig:
    buckets: tuple[Bucket, ...]

    def classify(self, prompt_tokens: int) -> tuple[int, Bucket]:
        """(priority rank, bucket) for a prompt of ``prompt_tokens``; beyond every threshold -> the last."""
        for rank, b in enumerate(self.buckets):
            if b.max_tokens is None or prompt_tokens <= b.max_tokens:
                return rank, b
        return len(self.buckets) - 1, self.buckets[-1]

    def spill_pools(self, bucket: Bucket) -> frozenset[str]:
        names = bucket.spill_to
        if names is None:
            rank = next(i for i, b in enumerate(self.buckets) if b.name == bucket.name)
            names = tuple(b.name for b in self.buckets[rank + 1 :])
        others = [b for b in self.buckets if b.name != bucket.name and b.name in names]
        return frozenset(p for b in others for p in b.pools)


@dataclass(frozen=True, slots=True)
class BucketChoice:
    candidates: Candidates
    bucket: Bucket
    priority: int
    fallback: bool


def bucket_candidates(ctx: Context, cands: Candidates, cfg: BucketConfig) -> BucketChoice:
    """Candidates in the request's bucket pools, or the fallback described in the module docstring."""
    rank, bucket = cfg.classify(ctx.request.prompt_tokens)
    by_id = ctx.snapshot.by_id
    own_pools = frozenset(bucket.pools)
    own = tuple(c for c in cands if by_id[c].pool in own_pools)

    snapshot, settings = ctx.snapshot, ctx.settings
    if own and not all(_known_saturated(snapshot.state(c), settings) for c in own):
        return BucketChoice(own, bucket, rank, fallback=False)
    spill = cfg.spill_pools(bucket)
    # saturation() counts stale signals as saturated, so a spill target is always freshly known to be free.
    spill_free = tuple(
        c for c in cands if by_id[c].pool in spill and saturation(snapshot.state(c), settings) < 1.0
    )
    if spill_free:
        return BucketChoice(spill_free, bucket, rank, fallback=True)
    if own:
        return BucketChoice(own, bucket, rank, fallback=False)
    return BucketChoice(cands, bucket, rank, fallback=True)


def _known_saturated(state: BackendState, settings: PolicySettings) -> bool:
    """Saturated by fresh signals (stale ones prove nothing either way)."""
    return not state.is_stale(settings.stale_after_s) and saturation(state, settings) >= 1.0


def parse_buckets(raw: Any, path: str = "buckets") -> BucketConfig:
    """``[{"name": "short", "max_tokens": 2048, "pools": ["short"]}, {"name": "long", "pools":
    ["long"]}]``."""
    if not isinstance(raw, Sequence) or isinstance(raw, str) or not raw:
        raise ConfigError(f"{path}: expected a non-empty list of buckets")
    out: list[Bucket] = []
    for i, item in enumerate(raw):
        here = f"{path}[{i}]"
        if not isinstance(item, Mapping):
            raise ConfigError(f"{here}: expected a mapping with name, max_tokens, pools")
        unknown = set(item) - {"name", "max_tokens", "pools", "spill_to"}
        if unknown:
            raise ConfigError(f"{here}: unknown keys {sorted(unknown)}")
        name, limit, pools = item.get("name"), item.get("max_tokens"), item.get("pools")
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{here}.name: expected a bucket name")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise ConfigError(f"{here}.max_tokens: expected a non-negative integer, got {limit!r}")
        if limit is None and i != len(raw) - 1:
            raise ConfigError(f"{here}.max_tokens: only the last bucket may be unbounded")
        if out and limit is not None and (out[-1].max_tokens or 0) >= limit:
            raise ConfigError(
                f"{here}.max_tokens: thresholds must increase ({out[-1].max_tokens} >= {limit})"
            )
        if not _str_list(pools):
            raise ConfigError(f"{here}.pools: expected a non-empty list of pool names")
        spill = item.get("spill_to")
        if spill is not None and not (_str_list(spill) or spill == []):
            raise ConfigError(f"{here}.spill_to: expected a list of bucket names")
        out.append(Bucket(name, limit, tuple(pools), None if spill is None else tuple(spill)))
    names = [b.name for b in out]
    if len(set(names)) != len(names):
        raise ConfigError(f"{path}: bucket names must be unique, got {names}")
    for i, b in enumerate(out):
        missing = [n for n in b.spill_to or () if n not in names]
        if missing:
            raise ConfigError(f"{path}[{i}].spill_to: unknown buckets {missing}")
    return BucketConfig(tuple(out))


def _str_list(value: object) -> TypeGuard[list[str] | tuple[str, ...]]:
    return isinstance(value, list | tuple) and bool(value) and all(isinstance(v, str) for v in value)
