"""Walking a plan: set a step, wait an interval, read the gates, advance, hold or roll back.

The walk owns the split through the ``walker`` annotation: it re-reads the object while it waits and before
every write, and stops without writing when someone paused it, rolled back, set a percent by hand or started
another walk. Time comes from a :class:`Clock`, so tests run the walk on a fake one.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from infctl.cutover import decide
from infctl.cutover.backends import TrafficBackend
from infctl.cutover.gates import Gate, GateResult, GroupStats, evaluate, parse_gates
from infctl.cutover.ops import Outcome, View, commit, load, status_dict
from infctl.cutover.plan import Plan, timeline
from infctl.cutover.state import CutoverState, Entry
from infctl.cutover.target import SourceFactory

Event = Callable[[str, dict[str, Any]], None]


class Clock(Protocol):
    def now(self) -> float:
        """Unix seconds."""

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def now(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


@dataclass(frozen=True)
class WalkOptions:
    min_requests: float = 20
    """A window with fewer requests to the new group (or to old, for a relative gate) is inconclusive."""
    check_every_s: float = 30.0
    """While waiting, re-read the object this often (seconds) to stop soon after a --pause or --rollback."""
    gate_old: str | None = None
    """Upstream label of the old system in the gate metrics; default: the old upstream/backendRef name."""
    gate_new: str | None = None
    """Upstream label of the new system in the gate metrics; default: the new name."""


@dataclass(frozen=True)
class WalkSettings:
    plan: Plan
    gates: str = ""
    """Gate expression as given (``ttft_p99<2s,error_rate<1%``); empty: advance every interval."""
    options: WalkOptions = field(default_factory=WalkOptions)


@dataclass
class WalkReport:
    outcome: str
    """complete | rolled-back | stopped | dry-run."""
    reason: str
    view: View
    state: CutoverState
    timeline: list[tuple[float, int]] = field(default_factory=list)
    windows: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "reason": self.reason, "windows": self.windows,
                "timeline": [{"after_s": t, "percent": p} for t, p in self.timeline],
                **status_dict(self.view, self.state)}  # fmt: skip


async def walk(
    backend: TrafficBackend, sources: SourceFactory, settings: WalkSettings, *, old: str | None,
    new: str | None, actor: str, clock: Clock, on_event: Event | None = None, dry_run: bool = False,
    resume: bool = False,
) -> WalkReport:  # fmt: skip
    """Walk ``settings.plan`` from where the split stands; returns when it completes, rolls back or stops."""
    emit = on_event or (lambda kind, data: None)
    plan, opts = settings.plan, settings.options
    gates = parse_gates(settings.gates)
    view = await load(backend, old, new)
    s = view.state
    same = s.steps == plan.steps and s.gates == settings.gates
    if same and s.phase == "complete" and plan.next_step(s.percent) is None and not resume:
        return WalkReport("complete", f"already complete at {s.percent}%: nothing written", view, s)
    resume = resume or (same and s.phase == "walking")
    walker = f"{actor}/{uuid.uuid4().hex[:8]}"
    pinned = view.observed.split_set
    state = decide.begin(s, plan, settings.gates, walker=walker, now=clock.now(), actor=actor, resume=resume,
                         pinned=pinned)  # fmt: skip
    steps = list(timeline(plan, s.percent if pinned else 0))
    if dry_run:
        return WalkReport("dry-run", f"would walk {plan.to_text()} from {s.percent}%", view, state, steps)
    view = (await commit(backend, view, state, dry_run=False)).view
    emit("start", {"percent": state.percent, "resumed": resume, "timeline": steps, "gates": settings.gates})
    labels = (opts.gate_old or view.old, opts.gate_new or view.new)
    source = sources(labels)
    windows: list[dict[str, Any]] = []
    while True:
        await source.start()
        emit("wait", {"percent": view.state.percent, "seconds": plan.interval_s})
        stopped = await _wait(backend, view, walker, plan.interval_s, opts.check_every_s, clock)
        if stopped is not None:
            return _stopped(stopped, windows, emit)
        stats = await source.measure(plan.interval_s)
        view = await load(backend, view.old, view.new)
        if (why := _lost(view.state, walker)) is not None:
            return _stopped((view, why), windows, emit)
        at = view.state.percent
        results = judge(gates, stats, labels, at, opts.min_requests)
        d = decide.next_weight(view.state, plan, results)
        if d.action != "hold":
            state = decide.apply(view.state, d, results, clock.now(), actor)
            view = (await commit(backend, view, state, dry_run=False)).view
        windows.append({"percent": at, "decision": d.action, "next_percent": d.percent, "reason": d.reason,
                        "gates": [r.to_dict() for r in results]})  # fmt: skip
        emit("window", windows[-1])
        if d.action in ("rollback", "complete"):
            outcome = "rolled-back" if d.action == "rollback" else "complete"
            return WalkReport(outcome, d.reason, view, view.state, windows=windows)


def judge(
    gates: tuple[Gate, ...], stats: Mapping[str, GroupStats], labels: tuple[str, str], percent: int,
    min_requests: float,
) -> tuple[GateResult, ...]:  # fmt: skip
    """The gates on one window, plus the share check when the old group is measured too (pure)."""
    old, new = stats.get(labels[0]), stats.get(labels[1], GroupStats())
    results = evaluate(gates, new, old, min_requests=min_requests)
    if old is None:
        return results
    share = decide.share_check(percent, new.requests, new.requests + old.requests, min_requests)
    return (*results, share)


async def resume(
    backend: TrafficBackend, sources: SourceFactory, *, old: str | None, new: str | None, actor: str,
    clock: Clock, options: WalkOptions | None = None, on_event: Event | None = None, dry_run: bool = False,
) -> WalkReport | Outcome:  # fmt: skip
    """``--resume``: continue the stored walk (paused or rolled back); otherwise just clear the pause."""
    view = await load(backend, old, new)
    s = view.state
    if s.steps and s.interval_s > 0 and s.phase in ("walking", "rolled-back"):
        settings = WalkSettings(Plan(s.steps, s.interval_s), s.gates, options or WalkOptions())
        return await walk(backend, sources, settings, old=old, new=new, actor=actor, clock=clock,
                          on_event=on_event, dry_run=dry_run, resume=True)  # fmt: skip
    if not s.paused:
        return await commit(backend, view, None, dry_run=dry_run)
    entry = Entry(clock.now(), "resume", s.percent, s.percent, actor, "pause cleared")
    return await commit(backend, view, s.record(entry, paused=False), dry_run=dry_run)


async def _wait(
    backend: TrafficBackend, view: View, walker: str, seconds: float, every: float, clock: Clock
) -> tuple[View, str] | None:
    """Sleep ``seconds`` in slices of ``every``, re-reading between slices; (view, why) when the walk lost
    the split."""
    left = seconds
    while left > 1e-9:
        chunk = min(every, left)
        await clock.sleep(chunk)
        left -= chunk
        if left > 1e-9:
            view = await load(backend, view.old, view.new)
            if (why := _lost(view.state, walker)) is not None:
                return view, why
    return None


def _lost(state: CutoverState, walker: str) -> str | None:
    last = state.history[-1] if state.history else None
    by = f" by {last.actor}" if last else ""
    if state.paused:
        return f"paused{by}; `infctl cutover --resume` continues"
    if state.walker != walker:
        if state.phase == "walking":
            return f"another walk took over ({state.walker})"
        return f"{state.phase} at {state.percent}%{by}"
    return None


def _stopped(at: tuple[View, str], windows: list[dict[str, Any]], emit: Event) -> WalkReport:
    view, why = at
    emit("stopped", {"reason": why})
    return WalkReport("stopped", why, view, view.state, windows=windows)
