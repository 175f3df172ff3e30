"""The live router's admission control on the virtual clock.

While every routable backend is saturated by fresh signals (``infctl.router.admission.saturated``, the
live decision, imported), a new request waits in a bounded queue instead of being routed; it is released
short-prompt first, then in arrival order, one at a time whenever a request finishes or a scrape lands and
the fleet is no longer saturated, as the live ``AdmissionQueue.wake`` does. A request that finds the queue
full, or waits past the deadline, is answered 429.
"""

from __future__ import annotations

import heapq
import itertools
from collections import Counter
from dataclasses import dataclass
from typing import Generic, TypeVar

from infctl.config.router import router_default
from infctl.errors import ConfigError
from infctl.router.admission import priority, saturated
from infctl.router.settings import PolicySettings
from infctl.router.snapshot import Snapshot

T = TypeVar("T")


@dataclass(frozen=True)
class AdmissionSettings:
    """The router's admission settings (``infctl router`` flags of the same names)."""

    queue: int = router_default("admission_queue")
    """Requests held while every backend is saturated (default: the live router's)."""
    deadline_s: float = router_default("admission_deadline_s")
    """Longest a request waits for capacity before a 429, seconds (default: the live router's)."""
    short_prompt_tokens: int = router_default("short_prompt_tokens")
    """Prompts up to this many tokens are released first (tokens; default: the live router's)."""

    def __post_init__(self) -> None:
        if self.queue < 1:
            raise ConfigError(f"admission queue must be >= 1, got {self.queue}", hint="--admission-queue 64")
        if self.deadline_s <= 0:
            raise ConfigError("admission deadline must be > 0 s", hint="--admission-deadline 30s")

    def priority(self, prompt_tokens: int) -> int:
        """0 for short prompts (released first), 1 otherwise: the live router's rule without buckets."""
        return priority(None, prompt_tokens, self.short_prompt_tokens)


class AdmissionRoom(Generic[T]):
    """The waiting room: ``hold`` a request, ``release`` one when there is room, ``expire`` it at its
    deadline."""

    def __init__(self, settings: AdmissionSettings, policy: PolicySettings) -> None:
        self.settings = settings
        self._policy = policy
        self._heap: list[tuple[int, int, T]] = []
        self._order = itertools.count()
        self._waiting: dict[int, T] = {}
        self.refused: Counter[str] = Counter()
        """429s by reason: ``admission_full``, ``admission_deadline`` (the live router's metric labels)."""
        self.held = 0
        """Requests that had to wait (released or refused at their deadline)."""
        self.admitted_after_wait = 0

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def must_wait(self, snapshot: Snapshot) -> bool:
        """The live rule: wait when others already wait or the fleet is saturated now."""
        return bool(self._waiting) or saturated(snapshot, self._policy)

    def hold(self, item: T, prompt_tokens: int) -> int | None:
        """Queue ``item``; its ticket (give it back to ``expire``), or None when the queue is full (429)."""
        if len(self._waiting) >= self.settings.queue:
            self.refused["admission_full"] += 1
            return None
        ticket = next(self._order)
        heapq.heappush(self._heap, (self.settings.priority(prompt_tokens), ticket, item))
        self._waiting[ticket] = item
        self.held += 1
        return ticket

    def release(self, snapshot: Snapshot) -> T | None:
        """One waiting request when the fleet has room (``snapshot`` is not saturated), else None."""
        heap = self._heap
        while heap and heap[0][1] not in self._waiting:
            heapq.heappop(heap)  # expired earlier
        if not heap or saturated(snapshot, self._policy):
            return None
        _, ticket, item = heapq.heappop(heap)
        del self._waiting[ticket]
        self.admitted_after_wait += 1
        return item

    def expire(self, ticket: int) -> T | None:
        """The deadline of ``ticket``: the request if it is still waiting (answer it 429), else None."""
        item = self._waiting.pop(ticket, None)
        if item is not None:
            self.refused["admission_deadline"] += 1
        return item

    def drain(self) -> list[T]:
        """Every request still waiting (the run stopped), in release order; the room is left empty."""
        items = [item for _, ticket, item in sorted(self._heap) if ticket in self._waiting]
        self._heap.clear()
        self._waiting.clear()
        return items
