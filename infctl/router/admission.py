"""Admission control: when every backend is saturated, hold requests in a bounded queue (short ones first)
instead of piling them onto engines or failing them; answer 429 only when the queue is full or a request has
waited past its deadline.

``saturated`` is the pure decision; :class:`AdmissionQueue` is the waiting room the proxy awaits.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable

from infctl.router.policies.load import saturation
from infctl.router.settings import PolicySettings
from infctl.router.snapshot import Snapshot


def saturated(snapshot: Snapshot, settings: PolicySettings) -> bool:
    """True when no routable backend has room: each is at or over saturation by *fresh* signals.

    Stale signals do not hold requests back here (routing already avoids them); only evidence of a full
    queue or full KV cache does.
    """
    fresh = False
    for b in snapshot.backends:
        if not b.routable:
            continue
        state = snapshot.state(b.id)
        if state.is_stale(settings.stale_after_s):
            continue
        fresh = True
        if saturation(state, settings) < 1.0:
            return False
    return fresh


class QueueFull(Exception):
    """The admission queue is at capacity."""


class Deadline(Exception):
    """A request waited longer than the admission deadline."""


class AdmissionQueue:
    """Requests waiting for capacity, released lowest priority value first (short requests), then FIFO."""

    def __init__(self, max_waiting: int, deadline_s: float, is_saturated: Callable[[], bool]) -> None:
        self.max_waiting = max_waiting
        self.deadline_s = deadline_s
        self._is_saturated = is_saturated
        self._heap: list[tuple[int, int, asyncio.Future[None]]] = []
        self._order = itertools.count()
        self.admitted_after_wait = 0
        self.rejected_full = 0
        self.rejected_deadline = 0

    @property
    def waiting(self) -> int:
        return len(self._heap)

    async def admit(self, priority: int, *, saturated_now: bool) -> bool:
        """Return when the request may be routed (True if it had to wait); raise QueueFull or Deadline.

        ``saturated_now`` is the caller's reading of the snapshot it already built for routing."""
        if self.max_waiting <= 0 or (not self._heap and not saturated_now):
            return False
        if len(self._heap) >= self.max_waiting:
            self.rejected_full += 1
            raise QueueFull
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (priority, next(self._order), fut)
        heapq.heappush(self._heap, entry)
        try:
            await asyncio.wait_for(asyncio.shield(fut), timeout=self.deadline_s)
        except TimeoutError:
            self.rejected_deadline += 1
            raise Deadline from None
        finally:
            if not fut.done():
                fut.cancel()
                self._heap.remove(entry)
                heapq.heapify(self._heap)
        self.admitted_after_wait += 1
        return True

    def wake(self) -> None:
        """Release waiters while there is capacity (call after a request finishes and after each scrape)."""
        while self._heap and not self._is_saturated():
            _, _, fut = heapq.heappop(self._heap)
            if not fut.done():
                fut.set_result(None)
                return  # one at a time: the released request changes the load the next check sees
