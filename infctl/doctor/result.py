"""What every check returns: a :class:`CheckResult`, and how a list of them adds up to a verdict."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

Group = Literal["cluster", "engines", "router", "autoscaler", "local"]
GROUPS: tuple[Group, ...] = ("local", "cluster", "engines", "router", "autoscaler")
"""Display order: what runs on this machine, then the cluster, the engines, the router in front of them,
the autoscaler sizing them."""

Status = Literal["pass", "warn", "fail", "skip"]
"""pass: as it should be; warn: works, but degraded or about to break; fail: needs fixing before it works;
skip: could not or need not be checked (the summary says why)."""


@dataclass(frozen=True, slots=True)
class CheckResult:
    """One finding: what was checked, on what, the verdict, and what to do about it."""

    group: Group
    name: str
    """Short check name, e.g. ``health``, ``metrics``, ``crds``."""
    status: Status
    summary: str
    """One line saying what was found (with the numbers, names and URLs that prove it)."""
    fix: str | None = None
    """One line saying what to do; None when there is nothing to do."""
    target: str = ""
    """What was checked: an engine or router URL, a release, a cluster's API server."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def passed(group: Group, name: str, summary: str, *, target: str = "") -> CheckResult:
    return CheckResult(group, name, "pass", summary, None, target)


def warned(group: Group, name: str, summary: str, fix: str | None, *, target: str = "") -> CheckResult:
    return CheckResult(group, name, "warn", summary, fix, target)


def failed(group: Group, name: str, summary: str, fix: str | None, *, target: str = "") -> CheckResult:
    return CheckResult(group, name, "fail", summary, fix, target)


def skipped(group: Group, name: str, summary: str, *, target: str = "") -> CheckResult:
    return CheckResult(group, name, "skip", summary, None, target)


@dataclass(frozen=True, slots=True)
class DoctorReport:
    """Every result of one ``infctl doctor`` run, in display order."""

    results: tuple[CheckResult, ...]

    @property
    def counts(self) -> dict[Status, int]:
        seen = Counter(r.status for r in self.results)
        return {s: seen.get(s, 0) for s in ("pass", "warn", "fail", "skip")}

    @property
    def ok(self) -> bool:
        """True when nothing failed (warnings and skips do not fail a run)."""
        return all(r.status != "fail" for r in self.results)

    @property
    def exit_code(self) -> int:
        """0 when everything passed or warned, 1 when anything failed (2, bad input, is the CLI's)."""
        return 0 if self.ok else 1

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "counts": self.counts, "results": [r.to_dict() for r in self.results]}


def ordered(results: Iterable[CheckResult]) -> tuple[CheckResult, ...]:
    """Results grouped in :data:`GROUPS` order, keeping each group's own order (stable)."""
    rank = {g: i for i, g in enumerate(GROUPS)}
    return tuple(sorted(results, key=lambda r: rank[r.group]))


def worst(statuses: Sequence[Status]) -> Status:
    """fail > warn > pass > skip: the status a check made of parts reports."""
    order: tuple[Status, ...] = ("fail", "warn", "pass")
    return next((s for s in order if s in statuses), "skip")
