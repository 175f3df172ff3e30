"""Step plans and the weights of a split (pure).

A plan is an increasing list of percentages of traffic for the new system (``2,5,10,20,40``) walked one step
per interval. A split is written as integer weights that sum to 100, so the share is exact both on a
Gateway API HTTPRoute (weights are proportional, 0..1,000,000) and on the router's weighted groups.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise

from infctl import durations
from infctl.errors import ConfigError

TOTAL_WEIGHT = 100
"""Weights of old and new always sum to this."""


@dataclass(frozen=True, slots=True)
class Plan:
    """Where a walk goes and how long it stays at each step."""

    steps: tuple[int, ...]
    """Percentages of traffic to the new system, strictly increasing, each 1..100."""
    interval_s: float
    """Seconds spent at each step before its gates are read, > 0."""

    def next_step(self, percent: int) -> int | None:
        """The first step above ``percent``; None when the plan is finished."""
        return next((s for s in self.steps if s > percent), None)

    def to_text(self) -> str:
        return ",".join(str(s) for s in self.steps)


def parse_steps(text: str) -> tuple[int, ...]:
    """``"2,5,10,20,40"`` -> ``(2, 5, 10, 20, 40)``; a ``%`` after a number is allowed."""
    parts = [p.strip().removesuffix("%") for p in text.split(",") if p.strip()]
    try:
        steps = tuple(int(p) for p in parts)
    except ValueError:
        raise ConfigError(
            f"--plan {text!r}: steps are whole percentages", hint="write e.g. --plan 2,5,10,20,40"
        ) from None
    if not steps:
        raise ConfigError("--plan is empty", hint="write e.g. --plan 2,5,10,20,40")
    if any(not 1 <= s <= 100 for s in steps) or any(b <= a for a, b in pairwise(steps)):
        raise ConfigError(
            f"--plan {text!r}: steps must be 1..100 and strictly increasing", hint="e.g. --plan 2,5,10,20,40"
        )
    return steps


def parse_duration(text: str, *, what: str = "--interval") -> float:
    """``"10m" -> 600.0``, ``"500ms" -> 0.5``; a bare number is seconds. Must be > 0."""
    return durations.parse_duration(text, what=what, positive=True)


def format_duration(seconds: float) -> str:
    for unit, size in (("h", 3600.0), ("m", 60.0), ("s", 1.0)):
        if seconds >= size and (seconds / size).is_integer():
            return f"{int(seconds / size)}{unit}"
    return f"{seconds:g}s"


def check_percent(percent: int) -> int:
    if not 0 <= percent <= 100:
        raise ConfigError(f"--percent {percent}: expected 0..100", hint="e.g. --percent 40")
    return percent


def weights_for(percent: int, old: str, new: str) -> dict[str, int]:
    """The split that sends ``percent`` of traffic to ``new`` and the rest to ``old``."""
    check_percent(percent)
    if old == new:
        raise ConfigError(
            f"--old and --new are both {old!r}", hint="name two different upstreams/backendRefs"
        )
    return {old: TOTAL_WEIGHT - percent, new: percent}


def observed_percent(weights: Mapping[str, float], old: str, new: str) -> int:
    """The share ``new`` has of old+new, rounded to a whole percent (0 when both weigh nothing)."""
    w_old, w_new = max(weights.get(old, 0.0), 0.0), max(weights.get(new, 0.0), 0.0)
    total = w_old + w_new
    return 0 if total <= 0 else round(100 * w_new / total)


def timeline(plan: Plan, start_percent: int) -> Sequence[tuple[float, int]]:
    """(seconds from now, percent) of each move a walk makes if every gate passes (for --dry-run)."""
    out: list[tuple[float, int]] = []
    at, percent = 0.0, start_percent
    if percent == 0:
        percent = plan.steps[0]
        out.append((0.0, percent))
    while (step := plan.next_step(percent)) is not None:
        at += plan.interval_s
        percent = step
        out.append((at, percent))
    return out
