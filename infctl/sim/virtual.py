"""Drive an ``EngineCore`` on a virtual clock: per-request timings without sleeping (tests, benchmarks).

The driving rule is the one every driver follows: add each request at its arrival time; while there is
work, ``step(now)`` and deliver its events at ``now + duration``; when a step finds nothing to run, jump to
``next_ready_time()`` (a remote-KV arrival) or the next arrival, whichever comes first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import pairwise

from infctl.sim.scheduler import EngineCore
from infctl.sim.types import SimRequest, StepOutput


@dataclass(slots=True)
class RequestTrace:
    """What happened to one request, in the virtual clock's seconds."""

    arrival: float
    token_times: list[float] = field(default_factory=list)
    """When each generated token was delivered (one entry per token)."""
    finish_time: float | None = None
    finish_reason: str | None = None
    cached_tokens: int = 0

    @property
    def ttft(self) -> float | None:
        return self.token_times[0] - self.arrival if self.token_times else None

    @property
    def itls(self) -> list[float]:
        """Gaps between consecutive tokens."""
        t = self.token_times
        return [b - a for a, b in pairwise(t)]


OnStep = Callable[[float, StepOutput], None]


def run_until_idle(
    core: EngineCore, requests: Iterable[SimRequest], *, on_step: OnStep | None = None
) -> dict[str, RequestTrace]:
    """Feed ``requests`` at their ``arrival`` times and step until all are done; ``on_step(start, out)`` sees
    every step."""
    pending = sorted(requests, key=lambda r: r.arrival)
    traces: dict[str, RequestTrace] = {}
    now = pending[0].arrival if pending else 0.0
    nxt = idle_steps = 0
    while True:
        while nxt < len(pending) and pending[nxt].arrival <= now:
            req = pending[nxt]
            traces[req.request_id] = RequestTrace(arrival=req.arrival)
            core.add_request(req, req.arrival)
            nxt += 1
        next_arrival = pending[nxt].arrival if nxt < len(pending) else None
        if not core.has_work():
            if next_arrival is None:
                return traces
            now = next_arrival
            continue
        out = core.step(now)
        if on_step is not None:
            on_step(now, out)
        if out.duration > 0 or out.events or out.preempted:
            idle_steps = 0
            now += out.duration
            _deliver(traces, out, now)
            continue
        # Nothing could run: wait for remote KV or the next arrival. None means "step now" (something
        # changed, e.g. on_step aborted a request); twice in a row, or a wake-up that is already due,
        # means the core is blocked on nothing, which is a scheduler bug.
        ready = core.next_ready_time()
        if ready is None:
            idle_steps += 1
            if idle_steps > 1:
                raise RuntimeError(f"engine core stalled at t={now:.6f} with work left")
            continue
        idle_steps = 0
        wake = ready if next_arrival is None else min(ready, next_arrival)
        if wake <= now:
            raise RuntimeError(f"engine core blocked until t={wake:.6f}, already due at t={now:.6f}")
        now = wake


def _deliver(traces: dict[str, RequestTrace], out: StepOutput, at: float) -> None:
    for ev in out.events:
        trace = traces.get(ev.request_id)
        if trace is None:
            continue
        if ev.new_tokens:
            if not trace.token_times:
                trace.cached_tokens = ev.cached_tokens
            trace.token_times.extend([at] * ev.new_tokens)
        if ev.finished:
            trace.finish_time = at
            trace.finish_reason = ev.finish_reason
