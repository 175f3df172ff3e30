"""The one-shot commands: status, --percent, --pause, --rollback (thin I/O around :mod:`decide`).

Each reads the traffic object once, decides purely, and writes at most once with the version it read, so a
concurrent change is refused rather than overwritten. A command with nothing to change writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from infctl.cutover import decide
from infctl.cutover.backends import Observed, TrafficBackend
from infctl.cutover.errors import CutoverError
from infctl.cutover.plan import Plan, check_percent, observed_percent, weights_for
from infctl.cutover.state import PREFIX, CutoverState, from_annotations, iso


@dataclass(frozen=True)
class View:
    """The traffic object as read, its cutover state, and the old/new names in force."""

    observed: Observed
    state: CutoverState
    old: str
    new: str
    where: str
    stored_percent: int = 0
    """The share the last cutover write recorded; differs from :attr:`percent` after a hand edit."""

    @property
    def percent(self) -> int:
        """The share new actually has, from the weights (the truth, even if someone edited them by hand)."""
        return observed_percent(self.observed.weights, self.old, self.new)


@dataclass(frozen=True)
class Outcome:
    view: View
    state: CutoverState
    changed: bool
    """False: nothing to do (already so), or a dry run."""
    dry_run: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {**status_dict(self.view, self.state), "changed": self.changed, "dry_run": self.dry_run}


async def load(backend: TrafficBackend, old: str | None = None, new: str | None = None) -> View:
    """Read the object and resolve names: given ones, else those stored with the state, else inferred."""
    observed = await backend.read()
    state = from_annotations(observed.annotations, backend.where)
    old, new = old or state.old, new or state.new
    if old is None or new is None:
        old, new = _infer(observed.targets, old, new)
    missing = [n for n in (old, new) if observed.targets and n not in observed.targets]
    if missing:
        raise CutoverError(
            f"{backend.where} has no {' or '.join(repr(m) for m in missing)} to send traffic to "
            f"(it has: {', '.join(observed.targets) or 'nothing'})",
            hint="name them with --old NAME --new NAME (router upstream groups, HTTPRoute backendRefs)",
        )
    percent = observed_percent(observed.weights, old, new)
    view = View(
        observed, replace(state, percent=percent, old=old, new=new), old, new, backend.where, state.percent
    )
    return view


def _infer(targets: tuple[str, ...], old: str | None, new: str | None) -> tuple[str, str]:
    """``old``/``new`` when they exist; on a route rendered by infctl, new is ``*-router`` or ``*-pool``."""
    if old is None and new is None and "old" not in targets and len(targets) == 2:
        ours = [t for t in targets if t.endswith(("-router", "-pool"))]
        if len(ours) == 1:
            return next(t for t in targets if t != ours[0]), ours[0]
    return old or "old", new or "new"


async def commit(
    backend: TrafficBackend, view: View, state: CutoverState | None, *, dry_run: bool
) -> Outcome:
    """Write ``state`` (its split and annotations) with the version of ``view``; None state: nothing to do."""
    if state is None:
        return Outcome(view, view.state, changed=False, dry_run=dry_run)
    state = replace(state, old=view.old, new=view.new)
    if dry_run:
        return Outcome(view, state, changed=False, dry_run=True)
    kept = {k: v for k, v in view.observed.annotations.items() if not k.startswith(PREFIX)}
    observed = await backend.write(
        weights_for(state.percent, view.old, view.new),
        {**kept, **state.to_annotations()},
        view.observed.version,
    )
    return Outcome(replace(view, observed=observed, state=state), state, changed=True)


Change = Callable[[CutoverState], CutoverState | None]


async def change(
    backend: TrafficBackend, fn: Change, old: str | None, new: str | None, *, dry_run: bool
) -> Outcome:
    view = await load(backend, old, new)
    return await commit(backend, view, fn(view.state), dry_run=dry_run)


async def set_percent(backend: TrafficBackend, percent: int, *, old: str | None, new: str | None,
                      now: float, actor: str, dry_run: bool = False) -> Outcome:  # fmt: skip
    check_percent(percent)
    view = await load(backend, old, new)
    pinned = view.observed.split_set
    state = decide.set_percent(view.state, percent, now=now, actor=actor, pinned=pinned)
    return await commit(backend, view, state, dry_run=dry_run)


async def pause(backend: TrafficBackend, *, old: str | None, new: str | None, now: float, actor: str,
                dry_run: bool = False) -> Outcome:  # fmt: skip
    return await change(backend, lambda s: decide.pause(s, now=now, actor=actor), old, new, dry_run=dry_run)


async def rollback(backend: TrafficBackend, *, old: str | None, new: str | None, now: float, actor: str,
                   dry_run: bool = False) -> Outcome:  # fmt: skip
    return await change(
        backend, lambda s: decide.rollback(s, now=now, actor=actor), old, new, dry_run=dry_run
    )


def status_dict(view: View, state: CutoverState | None = None) -> dict[str, Any]:
    """What ``cutover status`` shows: the split, the walk, the next step, the history."""
    s = state or view.state
    plan = Plan(s.steps, s.interval_s) if s.steps else None
    walking = s.phase == "walking" and not s.paused
    weights = weights_for(s.percent, view.old, view.new) if state is not None else dict(view.observed.weights)
    drift = s.phase != "idle" and view.stored_percent != view.percent and state is None
    unset = not view.observed.split_set and state is None
    return {
        "where": view.where, "old": view.old, "new": view.new, "percent": s.percent, "weights": weights,
        "phase": s.phase, "paused": s.paused, "plan": list(s.steps), "interval_s": s.interval_s,
        "gates": s.gates, "next_step": plan.next_step(s.percent) if plan and walking else None,
        "walker": s.walker or None, "last_actor": s.actor or None,
        "updated": iso(s.updated) if s.updated is not None else None,
        "history": [e.to_dict() for e in s.history],
        "drift": f"weights edited by hand (cutover last set {view.stored_percent}%)" if drift else None,
        "split_set": not unset,
        "note": "no weights set: the router splits by its groups' capacity; --percent or a walk pins it"
        if unset else None,
    }  # fmt: skip
