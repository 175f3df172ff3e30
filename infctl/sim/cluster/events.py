"""The virtual clock: a heap of (time, kind, sequence, payload).

At equal times, kinds run in a fixed order so that a run is a pure function of its inputs: step ends
first (tokens delivered, capacity freed), then engines becoming ready, scrapes, scaling decisions, refused
requests' answers, admission deadlines (a request released by a finish at its deadline is not refused),
new requests, and last engine wake-ups, so every request arriving at an instant joins the step that starts
then.
"""

from __future__ import annotations

import heapq
from typing import Any

STEP_END, READY, SCRAPE, SCALE, REFUSED, DEADLINE, TRAFFIC, WAKE = range(8)


class EventQueue:
    __slots__ = ("_heap", "_seq", "now")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, int, Any]] = []
        self._seq = 0
        self.now = 0.0
        """Time of the event being handled (virtual seconds)."""

    def push(self, t: float, kind: int, payload: Any = None) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (t, kind, self._seq, payload))

    def pop(self) -> tuple[float, int, Any]:
        t, kind, _, payload = heapq.heappop(self._heap)
        self.now = t
        return t, kind, payload

    def peek_time(self) -> float | None:
        return self._heap[0][0] if self._heap else None

    def __len__(self) -> int:
        return len(self._heap)
