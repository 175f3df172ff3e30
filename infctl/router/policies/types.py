"""The shapes a policy is made of: the per-request context, filters, scorers, pickers and the decision."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from infctl.router.settings import PolicySettings
from infctl.router.snapshot import Backend, RequestInfo, Snapshot

Candidates = tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Context:
    """Everything one decision may read. ``matches`` comes from a prefix index, looked up once per request
    outside the pure core (the index is the router's learned state, not part of the cluster snapshot)."""

    snapshot: Snapshot
    request: RequestInfo
    settings: PolicySettings = field(default_factory=PolicySettings)
    matches: Mapping[str, int] = field(default_factory=dict)
    """Backend id -> leading blocks of the request it holds."""

    def backend(self, backend_id: str) -> Backend:
        return self.snapshot.by_id[backend_id]


FilterFn = Callable[[Context, Candidates], Candidates]
ScoreFn = Callable[[Context, Candidates], Sequence[float]]
"""Scores in [0, 1], one per candidate, same order."""


@dataclass(frozen=True, slots=True)
class Filter:
    name: str
    fn: FilterFn
    soft: bool = False
    """A soft filter that would remove every candidate is skipped; a hard one fails the request."""


@dataclass(frozen=True, slots=True)
class Scorer:
    name: str
    fn: ScoreFn
    weight: float = 1.0


@dataclass(slots=True)
class PolicyState:
    """The only mutable input of a decision: the round-robin cursor. One per router process, passed in."""

    cursor: int = 0


PickFn = Callable[[Context, Candidates, Sequence[float], PolicyState], str]


@dataclass(frozen=True, slots=True)
class Picker:
    name: str
    fn: PickFn
    reason: str | None = None
    """Fixed decision reason for pickers that ignore cache and load (``round_robin``, ``random``)."""


@dataclass(frozen=True, slots=True)
class Decision:
    backend_id: str
    reason: str
    """Metric label: prefix_hit, load_gate, least_load, session, round_robin, random, power_of_two, ..."""
    scores: Mapping[str, float] = field(default_factory=dict)
    """Weighted total per final candidate (for debugging and the decision log)."""
    matched_blocks: int = 0
    """Leading request blocks the chosen backend holds, per the index."""
    bucket: str | None = None
    priority: int = 0
    """Length-bucket rank, 0 first: admission control serves lower values (short requests) first."""
    fallback: bool = False
    """The request's bucket pool was empty or saturated and another pool took it."""
    upstream: str | None = None
    """Upstream group chosen by weighted splitting, when configured."""
