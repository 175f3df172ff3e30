"""Weighted upstream groups and mirroring: which serving system (old/new, blue/green) takes a request.

A group is chosen by weighted rendezvous hashing of the request id: group g wins with probability exactly
w_g / sum(w), every replica computes the same group for the same id, and raising one group's weight only moves
requests *into* that group, so a cutover step from 10% to 20% never bounces a request back to the old system.

Without weights set, backends in several groups are still split, by capacity (:func:`applied_weights`): the
split the router applies is always one it can report (``GET /admin/upstreams``'s ``applied``), so a cutover
never reads "0% to new" while the policy spreads requests over both systems, and a PD pair never spans them.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from infctl.errors import ConfigError
from infctl.router.hashing import open_unit, stable_hash, unit
from infctl.router.snapshot import Backend, Snapshot


@dataclass(frozen=True, slots=True)
class UpstreamConfig:
    weights: Mapping[str, float] = field(default_factory=dict)
    """Group name -> relative weight (any scale; 0 takes nothing)."""
    mirror_to: str | None = None
    """Shadow group that receives a copy of a share of requests (responses discarded)."""
    mirror_percent: float = 0.0
    """Share of requests mirrored, 0..100."""


def pick_upstream(request_id: str, weights: Mapping[str, float]) -> str | None:
    """The group for ``request_id``; None when no group has a positive weight."""
    best, choice = -math.inf, None
    for group in sorted(weights):
        w = weights[group]
        if w <= 0:
            continue
        score = -w / math.log(open_unit(stable_hash(request_id, f"upstream:{group}")))
        if score > best:
            best, choice = score, group
    return choice


def applied_weights(cfg: UpstreamConfig | None, backends: Iterable[Backend]) -> Mapping[str, float]:
    """The weights the split applies: the configured ones; without any, each upstream group's capacity (the
    summed ``weight`` of its backends that answer clients: role both or decode), so the groups share
    traffic as one pool of their engines would, but by request id, reportably. Empty (no split) when fewer
    than two groups answer clients: one system, or prefill-only groups lending prefill legs to it. The
    mirror's shadow group takes no share. A group whose backends are all down or draining keeps its share
    here and is skipped per request (``split_upstream``), as with weights set."""
    if cfg is not None and cfg.weights:
        return cfg.weights
    shadow = cfg.mirror_to if cfg is not None else None
    capacity: dict[str, float] = {}
    for b in backends:
        group = b.upstream
        if group != shadow and b.role != "prefill":
            capacity[group] = capacity.get(group, 0.0) + b.weight
    return capacity if len(capacity) > 1 else {}


def split_upstream(
    request_id: str,
    snapshot: Snapshot,
    cands: Sequence[str],
    weights: Mapping[str, float],
    usable: Callable[[Sequence[str]], bool] = bool,
) -> tuple[str | None, tuple[str, ...]]:
    """The request's upstream group by ``weights`` (:func:`applied_weights`) and its candidates among
    ``cands``. A group with nothing ``usable`` (down, or for a PD request no decode backend) is skipped and
    the split redone among the others, keeping their relative weights; (None, cands) when no group is
    usable."""
    by_id = snapshot.by_id
    weights = dict(weights)
    while weights:
        group = pick_upstream(request_id, weights)
        if group is None:
            break
        kept = tuple(c for c in cands if by_id[c].upstream == group)
        if usable(kept):
            return group, kept
        del weights[group]
    return None, tuple(cands)


def should_mirror(request_id: str, percent: float) -> bool:
    """Whether to mirror this request; independent of the group split, stable per request id."""
    if percent <= 0:
        return False
    return unit(stable_hash(request_id, "mirror")) * 100.0 < percent


def mirror_target(request_id: str, cfg: UpstreamConfig) -> str | None:
    """The shadow group to copy this request to, or None."""
    if cfg.mirror_to and should_mirror(request_id, cfg.mirror_percent):
        return cfg.mirror_to
    return None


def shadow_backend(snapshot: Snapshot, group: str) -> str | None:
    """Where a mirrored copy goes: the routable backend of ``group`` with the fewest in-flight requests
    (ties broken by the backend's stable key, so replicas agree); None when the group has none up."""
    shadows = [b for b in snapshot.backends if b.upstream == group and b.routable]
    if not shadows:
        return None
    return min(shadows, key=lambda b: (snapshot.state(b.id).inflight, b.key)).id


def parse_upstreams(raw: Mapping[str, Any], path: str = "upstreams") -> UpstreamConfig:
    """``{"weights": {"old": 90, "new": 10}, "mirror": {"to": "shadow", "percent": 5}}``."""
    unknown = set(raw) - {"weights", "mirror"}
    if unknown:
        raise ConfigError(f"{path}: unknown keys {sorted(unknown)}", hint="expected weights and mirror")
    weights = raw.get("weights", {})
    if not isinstance(weights, Mapping):
        raise ConfigError(f"{path}.weights: expected a mapping of group name to weight")
    clean: dict[str, float] = {}
    for name, w in weights.items():
        value = math.nan
        if isinstance(w, int | float) and not isinstance(w, bool):
            with contextlib.suppress(OverflowError):  # an integer too large for a float
                value = float(w)
        if not 0 <= value < math.inf:
            raise ConfigError(f"{path}.weights.{name}: expected a finite non-negative number, got {w!r}")
        clean[str(name)] = value
    if clean and not any(clean.values()):
        raise ConfigError(
            f"{path}.weights: every group weighs 0, so the split could send a request nowhere",
            hint="give the group that should take the traffic a positive weight, e.g. {old: 100, new: 0}",
        )
    mirror = raw.get("mirror") or {}
    if not isinstance(mirror, Mapping):
        raise ConfigError(f"{path}.mirror: expected a mapping with 'to' and 'percent'")
    percent = mirror.get("percent", 0.0)
    if isinstance(percent, bool) or not isinstance(percent, int | float) or not 0 <= percent <= 100:
        raise ConfigError(f"{path}.mirror.percent: expected 0..100, got {percent!r}")
    target = mirror.get("to")
    if target is not None and not isinstance(target, str):
        raise ConfigError(f"{path}.mirror.to: expected a group name, got {target!r}")
    return UpstreamConfig(weights=clean, mirror_to=target, mirror_percent=float(percent))
