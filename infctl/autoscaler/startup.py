"""How long a unit's new replicas take to serve (pure): when each was asked for, matched to readiness.

The daemon sees a unit as counts (:class:`~infctl.autoscaler.snapshot.UnitStatus`: asked for, ready), on
Kubernetes and on the local target alike, so replicas are matched by count: each replica asked for waits in
a queue with the time it was asked for, and when the ready count rises the oldest asks are served first.

- The daemon's own scale-up is timed from its decision (:func:`asked`); a rise in ``desired`` it did not
  make (another scaler, ``kubectl scale``) from the observation that first saw it.
- A scale-down takes back the newest asks still waiting: Kubernetes deletes the youngest unready pods
  first, the local supervisor its last started engine. A replica removed before it was ready gives nothing.
- A replica that falls out of ready while ``desired`` holds (a crash, an OOM kill, or only a readiness
  probe failing under load) is not a start-up: it waits untimed and gives nothing when ready again, so
  neither the histogram, :attr:`Ledger.longest` nor :func:`over_hold` sees restarts or readiness blips.
  Only a scale-up (what a unit at 0 goes through when the router wakes it) is checked against the hold.
- Replicas pending when the daemon first looks were asked for at a time it never saw: they give nothing.

Readiness is seen at each decision, so a start-up is measured to within one decision interval (longer,
never shorter). Replicas are matched by count, oldest first, so a restart that recovers while a scale-up
is still starting may be credited to it. The router's hold (``hold_when_empty_s``) must beat a start-up
for a unit that may go to 0.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from infctl.autoscaler.snapshot import UnitStatus

RECENT = 8
"""Start-ups kept per unit for :attr:`Ledger.longest`: a slow start-up counts until this many newer ones."""


@dataclass(frozen=True, slots=True)
class Ledger:
    """One unit's replicas asked for and not ready yet, and its recent start-ups."""

    desired: int | None = None
    """Replicas asked for, as last known; None before the first observation."""
    waiting: tuple[float | None, ...] = ()
    """When each replica not ready yet was asked for (seconds on the daemon's clock), oldest first; None:
    not timed (pending before the daemon looked, or a restart)."""
    recent: tuple[float, ...] = ()
    """The last :data:`RECENT` start-ups from a scale-up, seconds, oldest first (never a restart)."""

    @property
    def longest(self) -> float | None:
        """The longest recent start-up, seconds; None before any."""
        return max(self.recent) if self.recent else None


def asked(ledger: Ledger, desired: int, at: float) -> Ledger:
    """``ledger`` after the unit was scaled to ``desired`` replicas at ``at``."""
    if ledger.desired is None:
        return replace(ledger, desired=desired)
    waiting = ledger.waiting
    if desired > ledger.desired:
        waiting += (at,) * (desired - ledger.desired)
    elif desired < ledger.desired:
        waiting = waiting[: max(0, len(waiting) - (ledger.desired - desired))]
    return replace(ledger, desired=desired, waiting=waiting)


def observed(ledger: Ledger, status: UnitStatus, at: float) -> tuple[Ledger, tuple[float, ...]]:
    """``ledger`` after observing ``status`` at ``at``, and the scale-up start-ups that ended since
    (seconds)."""
    if ledger.desired is None:
        return replace(ledger, desired=status.desired, waiting=(None,) * status.pending), ()
    ledger = asked(ledger, status.desired, at)
    waiting, pending = ledger.waiting, status.pending
    if len(waiting) <= pending:  # more unready than asked for: restarts, not timed
        return replace(ledger, waiting=waiting + (None,) * (pending - len(waiting))), ()
    done, waiting = waiting[: len(waiting) - pending], waiting[len(waiting) - pending :]
    # Asked for and ready at the same observation: when it was asked is not known, so neither is its start-up.
    samples = tuple(at - t for t in done if t is not None and at > t)
    recent = (ledger.recent + samples)[-RECENT:]
    return replace(ledger, waiting=waiting, recent=recent), samples


def over_hold(ledger: Ledger, hold_s: float) -> bool:
    """Whether a recent scale-up start-up took longer than the router holds the first request (``hold_s``);
    restarts never count."""
    longest = ledger.longest
    return longest is not None and longest > hold_s
