"""Admission control: when a request's backends are all saturated, hold it in a bounded queue (short ones
first) instead of piling it onto engines or failing it; answer 429 only when the queue is full or the
request has waited past its deadline.

With length buckets a request can only run in its bucket's pools (or the pools it may spill into), so it
waits only while those are saturated: a saturated long pool does not hold short requests back. Its
priority is its bucket's rank (the first bucket's ``max_tokens`` is the short threshold); without buckets,
prompts up to ``short_prompt_tokens`` come first.

A pool scaled to zero has no backend at all: with ``hold_when_empty_s`` the request waits here for one to
appear (the autoscaler reads the wait in ``infctl_router_pool_queue_depth`` and wakes the pool; discovery or
the admin API adds the engine), for at most that long, instead of a 503 at once (see :func:`empty`).

``classify`` (``scope_of`` and ``priority`` at once), ``saturated``, ``empty`` and ``retry_after_s`` are pure
decisions; :class:`AdmissionQueue` is the waiting room the proxy awaits.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from infctl.router.policies.buckets import Bucket, BucketConfig
from infctl.router.policies.load import saturation
from infctl.router.settings import PolicySettings
from infctl.router.snapshot import Snapshot

DRAIN_WINDOW_S = 10.0
"""Releases from the queue over this many seconds give the drain rate that ``Retry-After`` is read from."""


@dataclass(frozen=True, slots=True)
class Scope:
    """The pools a request can be routed to: its bucket's own, and those it may spill into."""

    own: frozenset[str]
    spill: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Admission:
    """How one request waits, if it must: its queue order and the pools that can take it."""

    priority: int
    """Lowest first (see :func:`priority`)."""
    scope: Scope | None
    """See :func:`scope_of`."""


def classify(buckets: BucketConfig | None, prompt_tokens: int, short_prompt_tokens: int) -> Admission:
    """:func:`priority` and :func:`scope_of` of one prompt from a single bucket lookup (the request path's
    one call)."""
    if buckets is None:
        return Admission(priority(None, prompt_tokens, short_prompt_tokens), None)
    rank, bucket = buckets.classify(prompt_tokens)
    return Admission(rank, _scope(buckets, bucket))


def scope_of(buckets: BucketConfig | None, prompt_tokens: int) -> Scope | None:
    """The pools that can take a prompt of ``prompt_tokens``; None (every backend) without buckets."""
    if buckets is None:
        return None
    _, bucket = buckets.classify(prompt_tokens)
    return _scope(buckets, bucket)


def _scope(buckets: BucketConfig, bucket: Bucket) -> Scope:
    return Scope(frozenset(bucket.pools), buckets.spill_pools(bucket))


def priority(buckets: BucketConfig | None, prompt_tokens: int, short_prompt_tokens: int) -> int:
    """Queue order, lowest first: the bucket's rank with buckets, else 0 up to ``short_prompt_tokens``."""
    if buckets is not None:
        return buckets.classify(prompt_tokens)[0]
    return 0 if prompt_tokens <= short_prompt_tokens else 1


def saturated(snapshot: Snapshot, settings: PolicySettings, scope: Scope | None = None) -> bool:
    """True when no routable backend in ``scope`` has room: each is at or over saturation by *fresh*
    signals. ``scope`` None, or a scope whose own pools have no routable backend (bucketing then lets any
    backend take the request), means every backend.

    Stale signals do not hold requests back here (routing already avoids them); only evidence of a full
    queue or full KV cache does.
    """
    routable = [b for b in snapshot.backends if b.routable]
    if scope is not None and any(b.pool in scope.own for b in routable):
        routable = [b for b in routable if b.pool in scope.own or b.pool in scope.spill]
    fresh = False
    for b in routable:
        state = snapshot.state(b.id)
        if state.is_stale(settings.stale_after_s):
            continue
        fresh = True
        if saturation(state, settings) < 1.0:
            return False
    return fresh


def empty(snapshot: Snapshot, scope: Scope | None = None) -> bool:
    """True when no routable backend can take the request: none in ``scope``'s own pools (its pool is scaled
    to zero), or none at all (``scope`` None)."""
    if scope is None:
        return not any(b.routable for b in snapshot.backends)
    return not any(b.routable and b.pool in scope.own for b in snapshot.backends)


def headroom(snapshot: Snapshot, settings: PolicySettings, scope: Scope | None = None) -> int:
    """How many waiters one wake may release into ``scope`` (the same backends :func:`saturated` judges):
    the free places below ``saturation_queue`` in the queues of its fresh, unsaturated backends (at least
    one each). 0 exactly when :func:`saturated`; 1 when no signal is fresh (no evidence either way, so one
    at a time). The signals are the last scrape's, blind to what was released since: a wake never releases
    more than they show room for."""
    routable = [b for b in snapshot.backends if b.routable]
    if scope is not None and any(b.pool in scope.own for b in routable):
        routable = [b for b in routable if b.pool in scope.own or b.pool in scope.spill]
    fresh, room = False, 0
    for b in routable:
        state = snapshot.state(b.id)
        if state.is_stale(settings.stale_after_s) or state.signals is None:
            continue
        fresh = True
        if saturation(state, settings) < 1.0:
            room += max(1, math.ceil(settings.saturation_queue - state.signals.queue))
    return room if fresh else 1


def retry_after_s(waiting: int, drain_per_s: float, deadline_s: float) -> int:
    """Seconds a refused client should wait (the ``Retry-After`` header): the time the queue needs, at its
    recent drain rate, to release everyone waiting plus one; at least 1, at most the admission deadline
    (also the answer while nothing drains, since a request waits no longer than that)."""
    cap = max(1, math.ceil(deadline_s))
    if drain_per_s <= 0:
        return cap
    return min(cap, max(1, math.ceil((waiting + 1) / drain_per_s)))


class QueueFull(Exception):
    """The admission queue is at capacity."""


class Deadline(Exception):
    """A request waited longer than the admission deadline."""


_Entry = tuple[int, int, asyncio.Future[None]]


class AdmissionQueue:
    """Requests waiting for capacity, released lowest priority value first (short requests), then FIFO,
    among those whose scope has room.

    ``is_saturated()`` judges requests without a scope; ``scope_saturated(scope)`` those with one (when
    not given, they are judged by ``is_saturated`` too). ``room(scope)`` (see :func:`headroom`) is how
    many waiters of a scope (None: no scope) one wake may release; without it a wake releases one.
    ``is_empty(scope)`` (see :func:`empty`): while true, none of the scope's waiters is released (they wait
    for a backend to appear). ``clock``: seconds, for the drain rate."""

    def __init__(
        self,
        max_waiting: int,
        deadline_s: float,
        is_saturated: Callable[[], bool],
        *,
        scope_saturated: Callable[[Scope], bool] | None = None,
        room: Callable[[Scope | None], int] | None = None,
        is_empty: Callable[[Scope | None], bool] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_waiting = max_waiting
        self.deadline_s = deadline_s
        self._is_saturated = is_saturated
        self._scope_saturated = scope_saturated
        self._room = room
        self._is_empty = is_empty
        self._clock = clock
        self._heaps: dict[Scope | None, list[_Entry]] = {}
        self._waiting = 0
        self._order = itertools.count()
        self._released: deque[float] = deque()
        self.admitted_after_wait = 0
        self.rejected_full = 0
        self.rejected_deadline = 0

    @property
    def waiting(self) -> int:
        return self._waiting

    def waiting_by_pool(self) -> dict[str, int]:
        """Waiters per pool they may run in (their scope's own pools; one waiting for two counts in both);
        waiters without a scope are only in :attr:`waiting`."""
        out: dict[str, int] = {}
        for scope, heap in self._heaps.items():
            for pool in scope.own if scope is not None else ():
                out[pool] = out.get(pool, 0) + len(heap)
        return out

    async def admit(
        self, priority: int, *, saturated_now: bool, scope: Scope | None = None, hold_s: float | None = None
    ) -> bool:
        """Return when the request may be routed (True if it had to wait); raise QueueFull or Deadline.

        ``saturated_now`` is the caller's reading of the snapshot it already built for routing (for
        ``scope``); a request never overtakes earlier waiters of its scope. ``hold_s``: its deadline instead
        of ``deadline_s`` (a request held for a backend to appear)."""
        heap = self._heaps.get(scope)
        if self.max_waiting <= 0 or (not heap and not saturated_now):
            return False
        if self._waiting >= self.max_waiting:
            self.rejected_full += 1
            raise QueueFull
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (priority, next(self._order), fut)
        heapq.heappush(self._heaps.setdefault(scope, []), entry)
        self._waiting += 1
        try:
            await asyncio.wait_for(asyncio.shield(fut), timeout=self.deadline_s if hold_s is None else hold_s)
        except TimeoutError:
            self.rejected_deadline += 1
            raise Deadline from None
        finally:
            if not fut.done():
                fut.cancel()
                self._drop(scope, entry)
        self.admitted_after_wait += 1
        return True

    def wake(self) -> None:
        """Release waiters whose scope has room, lowest priority value then arrival first (call after a
        request finishes and after each scrape). The load a released request adds shows only in a later
        scrape, so each scope releases at most its ``room`` (one without it) per wake; a full scope's
        waiters stay."""
        budget: dict[Scope | None, int] = {}
        released = 0
        while self._heaps:
            heads = sorted(((h[0], s) for s, h in self._heaps.items()), key=lambda head: head[0][:2])
            for entry, scope in heads:
                if scope not in budget:
                    budget[scope] = self._budget(scope)
                if budget[scope] > 0:
                    budget[scope] -= 1
                    self._drop(scope, entry)
                    entry[2].set_result(None)
                    released += 1
                    break
            else:
                break
            if self._room is None:
                break
        if not released:
            return
        now = self._clock()
        self._released.extend([now] * released)
        while self._released and self._released[0] < now - DRAIN_WINDOW_S:
            self._released.popleft()

    def retry_after_s(self) -> int:
        """``Retry-After`` for a request refused now (see :func:`retry_after_s`)."""
        now = self._clock()
        recent = sum(1 for t in self._released if t >= now - DRAIN_WINDOW_S)
        return retry_after_s(self._waiting, recent / DRAIN_WINDOW_S, self.deadline_s)

    def _budget(self, scope: Scope | None) -> int:
        if self._is_empty is not None and self._is_empty(scope):
            return 0
        if self._room is not None:
            return max(0, self._room(scope))
        return 0 if self._full(scope) else 1

    def _full(self, scope: Scope | None) -> bool:
        if scope is None or self._scope_saturated is None:
            return self._is_saturated()
        return self._scope_saturated(scope)

    def _drop(self, scope: Scope | None, entry: _Entry) -> None:
        heap = self._heaps[scope]
        if heap[0] is entry:
            heapq.heappop(heap)
        else:
            heap.remove(entry)
            heapq.heapify(heap)
        self._waiting -= 1
        if not heap:
            del self._heaps[scope]
