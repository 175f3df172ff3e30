"""The live router's admission control on the virtual clock.

While every routable backend is saturated by fresh signals (``infctl.router.admission.saturated``, the
live decision, imported), a new request waits in a bounded queue instead of being routed; it is released
short-prompt first, then in arrival order, one at a time whenever a request finishes or a scrape lands and
the fleet is no longer saturated, as the live ``AdmissionQueue.wake`` does. A request that finds the queue
full, or waits past the deadline, is answered 429.

With ``hold_when_empty_s`` (scale-to-zero), a request that finds no backend at all waits too, up to that
long, until an engine is ready (``infctl.router.admission.empty``, the live rule); past it, a 503.
"""

from __future__ import annotations

import heapq
import itertools
from collections import Counter
from dataclasses import dataclass
from typing import Generic, TypeVar

from infctl.config.router import router_default
from infctl.errors import ConfigError
from infctl.router.admission import empty, priority, saturated
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
    hold_when_empty_s: float = router_default("hold_when_empty_s")
    """With no backend at all, hold a request this long for one to start (seconds; 0: a 503 at once)."""

    def __post_init__(self) -> None:
        if self.queue < 1:
            raise ConfigError(f"admission queue must be >= 1, got {self.queue}", hint="--admission-queue 64")
        if self.deadline_s <= 0:
            raise ConfigError("admission deadline must be > 0 s", hint="--admission-deadline 30s")
        if self.hold_when_empty_s < 0:
            raise ConfigError("hold_when_empty_s must be >= 0 s")

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
        self._held_empty: set[int] = set()
        """Tickets held because no backend existed (their deadline is ``hold_when_empty_s``)."""

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def must_wait(self, snapshot: Snapshot) -> bool:
        """The live rule: wait when others already wait, the fleet is saturated now, or (holding when
        empty) it has no backend at all."""
        return bool(self._waiting) or saturated(snapshot, self._policy) or self.empty(snapshot)

    def empty(self, snapshot: Snapshot) -> bool:
        """No backend to route to, and requests are held for one (``hold_when_empty_s`` > 0)."""
        return self.settings.hold_when_empty_s > 0 and empty(snapshot)

    def hold(self, item: T, prompt_tokens: int, *, for_backend: bool = False) -> int | None:
        """Queue ``item``; its ticket (give it back to ``expire``), or None when the queue is full (429).
        ``for_backend``: it waits for a backend to exist (its deadline: :meth:`deadline_s`)."""
        if len(self._waiting) >= self.settings.queue:
            self.refused["admission_full"] += 1
            return None
        ticket = next(self._order)
        if for_backend:
            self._held_empty.add(ticket)
        heapq.heappush(self._heap, (self.settings.priority(prompt_tokens), ticket, item))
        self._waiting[ticket] = item
        self.held += 1
        return ticket

    def holds(self, ticket: int) -> bool:
        """Whether ``ticket`` still waits (its deadline is still to come)."""
        return ticket in self._waiting

    def deadline_s(self, ticket: int) -> float:
        """How long ``ticket`` may wait."""
        return self.settings.hold_when_empty_s if ticket in self._held_empty else self.settings.deadline_s

    def release(self, snapshot: Snapshot) -> T | None:
        """One waiting request when the fleet has room (``snapshot`` is not saturated), else None."""
        heap = self._heap
        while heap and heap[0][1] not in self._waiting:
            heapq.heappop(heap)  # expired earlier
        if not heap or saturated(snapshot, self._policy) or self.empty(snapshot):
            return None
        _, ticket, item = heapq.heappop(heap)
        del self._waiting[ticket]
        self._held_empty.discard(ticket)
        self.admitted_after_wait += 1
        return item

    def expire(self, ticket: int) -> T | None:
        """The deadline of ``ticket``: the request if it is still waiting, else None. Answer it with
        :meth:`refusal`: a 429, or a 503 when it waited for a backend to exist."""
        item = self._waiting.pop(ticket, None)
        if item is not None:
            self.refused[self.refusal(ticket)] += 1
        return item

    def refusal(self, ticket: int) -> str:
        """Why ``ticket`` is refused at its deadline: ``admission_deadline`` (429) or
        ``no_backend_after_hold`` (503: no engine started in time)."""
        return "no_backend_after_hold" if ticket in self._held_empty else "admission_deadline"

    def drain(self) -> list[T]:
        """Every request still waiting (the run stopped), in release order; the room is left empty."""
        items = [item for _, ticket, item in sorted(self._heap) if ticket in self._waiting]
        self._heap.clear()
        self._waiting.clear()
        return items
