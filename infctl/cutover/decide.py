"""Decisions (pure): what a walk does after a window, and what each command makes of the state.

Every function takes a state and returns a new one (or a :class:`Decision`); none reads a clock or the
network, so the walk, ``--dry-run`` and the property tests run the same code.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from infctl.cutover.gates import GateResult
from infctl.cutover.plan import Plan
from infctl.cutover.state import CutoverState, Entry

SHARE_FLOOR = 0.5
"""A new group taking under this fraction of its expected share of a window fails the walk (and is
statistically far below it: more than four standard deviations)."""


@dataclass(frozen=True, slots=True)
class Decision:
    action: str
    """advance | hold | rollback | complete."""
    percent: int
    """Share of the new system after the decision."""
    reason: str


def next_weight(state: CutoverState, plan: Plan, results: tuple[GateResult, ...]) -> Decision:
    """After a window at ``state.percent``: advance, hold (inconclusive), roll back (a gate failed), end."""
    failed = [r for r in results if r.passed is False]
    if failed:
        target = rollback_target(state, state.percent)
        why = "; ".join(r.detail for r in failed)
        return Decision("rollback", target, f"gate failed at {state.percent}%: {why}; back to {target}%")
    unsure = [r for r in results if r.passed is None]
    if unsure:
        return Decision("hold", state.percent, "inconclusive: " + "; ".join(r.detail for r in unsure))
    step = plan.next_step(state.percent)
    passed = "gates passed" if results else "no gates"
    if step is None:
        return Decision("complete", state.percent, f"{passed} at {state.percent}%: plan complete")
    return Decision("advance", step, f"{passed} at {state.percent}%")


def share_check(percent: int, new_requests: float, total_requests: float, min_requests: float) -> GateResult:
    """Did the new group get (roughly) its share? Its backends may be ejected or down when it did not."""
    p = percent / 100
    expected = total_requests * p
    if expected < min_requests:
        detail = f"share: too little traffic to judge ({total_requests:g} requests)"
        return GateResult("share", None, None, True, detail)
    floor = min(expected * SHARE_FLOOR, expected - 4 * math.sqrt(total_requests * p * (1 - p)))
    ok = new_requests >= floor
    got = new_requests / total_requests
    detail = f"share: new took {got:.1%} of {total_requests:g} requests at {percent}%" + (
        "" if ok else " (its backends may be ejected or down)"
    )
    return GateResult("share", got, floor / total_requests, ok, detail)


def rollback_target(state: CutoverState, failed: int) -> int:
    """The last step of the current walk whose gates passed below ``failed``; 0 when there is none."""
    good = [e.previous for e in _this_walk(state) if e.action in ("advance", "complete") and e.gates]
    return max((p for p in good if p < failed), default=0)


def _this_walk(state: CutoverState) -> tuple[Entry, ...]:
    starts = [i for i, e in enumerate(state.history) if e.action == "start"]
    return state.history[starts[-1] :] if starts else ()


def apply(
    state: CutoverState, d: Decision, results: tuple[GateResult, ...], now: float, actor: str
) -> CutoverState:
    """The state after a walk's decision (a hold changes nothing)."""
    if d.action == "hold":
        return state
    entry = Entry(
        now, d.action, d.percent, state.percent, actor, d.reason, tuple(r.to_dict() for r in results)
    )
    phase = {"advance": "walking", "rollback": "rolled-back", "complete": "complete"}[d.action]
    return state.record(entry, phase=phase)


def begin(
    state: CutoverState, plan: Plan, gates: str, *, walker: str, now: float, actor: str, resume: bool = False,
    pinned: bool = True,
) -> CutoverState:  # fmt: skip
    """Own the split for a walk of ``plan``. From 0, or from a split nobody set (``pinned`` False: the router
    shares by capacity meanwhile), the first step is taken at once; from a share set above 0 the first window
    is read where the split stands. ``resume`` continues the stored walk."""
    first = plan.steps[0] if state.percent == 0 or not pinned else state.percent
    action = "resume" if resume else "start"
    reason = f"plan {plan.to_text()} every {plan.interval_s:g}s, gates {gates or 'none'}"
    entry = Entry(now, action, first, state.percent, actor, reason)
    return state.record(entry, phase="walking", paused=False, steps=plan.steps, interval_s=plan.interval_s,
                        gates=gates, walker=walker)  # fmt: skip


def set_percent(
    state: CutoverState, percent: int, *, now: float, actor: str, pinned: bool = True
) -> CutoverState | None:
    """``--percent N``: a manual split ends any walk. None when there is nothing to change (idempotent); a
    split nobody set (``pinned`` False) is written even at the same share, so it stays put."""
    if percent == state.percent and state.phase in ("manual", "idle") and state.walker == "" and pinned:
        return None
    entry = Entry(now, "set", percent, state.percent, actor, "manual")
    return state.record(entry, phase="manual", paused=False, walker="")


def rollback(state: CutoverState, *, now: float, actor: str) -> CutoverState | None:
    """``--rollback``: everything back to the old system, any walk ended. None when already there: at 0%
    with no walk to end, whatever the phase says (a "rollback 0% -> 0%" would record nothing happening)."""
    if state.percent == 0 and state.walker == "":
        return None
    why = "manual rollback" if state.percent else "manual rollback: walk ended, the split was already at 0%"
    entry = Entry(now, "rollback", 0, state.percent, actor, why)
    return state.record(entry, phase="rolled-back", paused=False, walker="")


def pause(state: CutoverState, *, now: float, actor: str) -> CutoverState | None:
    """``--pause``: a walk stops at its next check and the split stays. None when already paused."""
    if state.paused:
        return None
    entry = Entry(now, "pause", state.percent, state.percent, actor, f"paused in phase {state.phase}")
    return state.record(entry, paused=True)


def clear_pause(state: CutoverState) -> CutoverState:
    return replace(state, paused=False)
