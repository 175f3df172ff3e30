"""When each request is sent, on the virtual clock: ``infctl bench``'s load plan, replayed without sockets.

The same semantics as the live load generator (:mod:`infctl.bench.load`): stages run in order; a rate stage
draws gaps with :func:`infctl.bench.arrivals.arrival_offsets` from ``random.Random(seed)`` (so the schedule
equals the live one for a seed); a replay stage follows the trace's timestamps; a stage with a duration ends
at its end (a request drawn past it is kept for the next stage), one with a count ends at its last send; a
concurrency stage keeps that many requests in flight. A multi-turn request waits for its conversation's
previous turn to finish (that wait is not counted as lag: its scheduled time moves).
"""

from __future__ import annotations

import itertools
import math
import random
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

from infctl.bench.arrivals import arrival_offsets
from infctl.bench.config import LoadPlan, Stage
from infctl.bench.workloads.base import RequestSpec


@dataclass(slots=True)
class Send:
    """One request leaving the client."""

    index: int
    """Position in the run (0-based, in send order)."""
    stage: int
    scheduled_s: float
    spec: RequestSpec


class Traffic:
    """Drive with ``wake_at()`` / ``advance(now)`` (open-loop sends) and ``finished(send, now)``."""

    def __init__(self, specs: Iterator[RequestSpec], plan: LoadPlan, seed: int = 0) -> None:
        self._specs = specs
        self._plan = plan
        self._rng = random.Random(seed)
        self._index = itertools.count()
        self._held: RequestSpec | None = None
        self._stage = -1
        self._stage_end: float | None = None
        """Open-loop stage with a duration: when it ends."""
        self._offsets: Iterator[float] = iter(())
        self._next: tuple[float, RequestSpec] | None = None
        """The next open-loop send, drawn ahead."""
        self._t0 = 0.0
        self._last = 0.0
        """When the current stage last sent (a counted stage ends there)."""
        self._base: float | None = None
        self._count = 0
        self._closed_left: Iterator[int] = iter(())
        self._closed_deadline = math.inf
        self._closed_active = 0
        self._sessions: dict[int, deque[Send]] = {}
        """Conversations with a turn in flight -> turns waiting behind it."""
        self.exhausted = False
        """The workload ran out before the plan did."""
        self.done = False
        """No more sends will come (those waiting behind a session excepted)."""

    # -- the driver's interface ------------------------------------------------------------------------
    def start(self, now: float) -> list[Send]:
        return self._next_stage(now)

    def wake_at(self) -> float | None:
        """When ``advance`` has something to do: the next open-loop send or the end of a timed stage."""
        if self.done:
            return None
        if self._next is not None:
            return self._next[0]
        return self._stage_end

    def advance(self, now: float) -> list[Send]:
        """Sends due at ``now`` (and stage changes up to it)."""
        out: list[Send] = []
        while not self.done:
            if self._next is not None and self._next[0] <= now:
                due, spec = self._next
                self._count += 1
                self._last = due
                out += self._emit(spec, due)
                self._draw_open()
                continue
            if self._next is None and self._stage_end is not None and self._stage_end <= now:
                out += self._next_stage(self._stage_end)
                continue
            break
        return out

    def finished(self, send: Send, now: float) -> list[Send]:
        """A request ended: release its conversation's next turn, replace it in a closed loop."""
        out: list[Send] = []
        session = send.spec.session
        if session is not None:
            waiting = self._sessions.get(session)
            if waiting:
                nxt = waiting.popleft()
                nxt.scheduled_s = max(nxt.scheduled_s, now)
                out.append(nxt)
            else:
                self._sessions.pop(session, None)
        stage = self._plan.stages[self._stage] if 0 <= self._stage < len(self._plan.stages) else None
        if stage is not None and stage.mode == "concurrency" and send.stage == self._stage and not self.done:
            self._closed_active -= 1
            out += self._closed_one(now)
            if self._closed_active == 0:
                out += self._next_stage(now)
        return out

    # -- stages --------------------------------------------------------------------------------------
    def _next_stage(self, now: float) -> list[Send]:
        self._stage += 1
        self._next, self._stage_end, self._count, self._base = None, None, 0, None
        if self.exhausted or self._stage >= len(self._plan.stages):
            self.done = True
            return []
        stage = self._plan.stages[self._stage]
        self._t0 = self._last = now
        if stage.mode == "concurrency":
            assert stage.concurrency is not None
            self._closed_deadline = now + stage.duration_s if stage.duration_s else math.inf
            self._closed_left = (
                itertools.count() if stage.num_requests is None else iter(range(stage.num_requests))
            )
            self._closed_active = 0
            out: list[Send] = []
            for _ in range(stage.concurrency):
                out += self._closed_one(now)
            if self._closed_active == 0:
                return out + self._next_stage(now)
            return out
        self._offsets = (
            arrival_offsets(stage, self._plan.arrivals, self._plan.burstiness, self._rng)
            if stage.mode == "rate"
            else iter(())
        )
        self._draw_open()
        return self.advance(now)

    def _draw_open(self) -> None:
        """Draw the current open-loop stage's next send, or end the stage."""
        stage: Stage = self._plan.stages[self._stage]
        self._next = None
        if stage.num_requests is not None and self._count >= stage.num_requests:
            self._stage_end = self._last
            return
        spec = self._take()
        if spec is None:
            self.exhausted = True
            self._stage_end = self._last
            return
        if stage.mode == "rate":
            off = next(self._offsets, math.inf)
        else:
            if self._base is None:
                self._base = spec.at_s or 0.0
            off = (spec.at_s or 0.0) - self._base
        if stage.duration_s is not None and off >= stage.duration_s:
            self._held = spec
            self._stage_end = self._t0 + stage.duration_s
            return
        if math.isinf(off):  # a ramp down to rate 0 sends nothing more
            self._held = spec
            self._stage_end = self._last
            return
        self._next = (self._t0 + off, spec)

    def _closed_one(self, now: float) -> list[Send]:
        if now >= self._closed_deadline or next(self._closed_left, None) is None:
            return []
        spec = self._take()
        if spec is None:
            self.exhausted = True
            return []
        self._closed_active += 1
        return self._emit(spec, now)

    def _take(self) -> RequestSpec | None:
        held, self._held = self._held, None
        return held if held is not None else next(self._specs, None)

    def _emit(self, spec: RequestSpec, due: float) -> list[Send]:
        send = Send(next(self._index), self._stage, due, spec)
        if spec.session is None:
            return [send]
        waiting = self._sessions.get(spec.session)
        if waiting is not None:
            waiting.append(send)
            return []
        self._sessions[spec.session] = deque()
        return [send]
