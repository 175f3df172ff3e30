"""Cutover state (pure): kept in annotations on the traffic object, so a second operator sees the same thing.

Annotations (all strings)::

    infctl.io/cutover-percent    share of traffic for the new system the last write set, 0..100
    infctl.io/cutover-phase      idle | manual | walking | complete | rolled-back
    infctl.io/cutover-paused     "true" while a walk is paused
    infctl.io/cutover-plan       2,5,10,20,40           infctl.io/cutover-interval  600 (seconds)
    infctl.io/cutover-gates      ttft_p99<2s,error_rate<1%
    infctl.io/cutover-old        upstream/backendRef of the old system    infctl.io/cutover-new  ... new
    infctl.io/cutover-walker     the walk that owns the split (actor/id); a walk stops when it changes
    infctl.io/cutover-actor      who wrote last      infctl.io/cutover-updated  when (UTC, ISO 8601)
    infctl.io/cutover-history    JSON list of entries, oldest first (the last MAX_HISTORY kept)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from infctl.errors import ConfigError

PREFIX = "infctl.io/cutover-"
MAX_HISTORY = 100
"""History entries kept in the annotation (about 30 KB at most; annotations may total 256 KB)."""
PHASES = ("idle", "manual", "walking", "complete", "rolled-back")


@dataclass(frozen=True, slots=True)
class Entry:
    """One thing that happened to the split."""

    time: float
    """Unix seconds."""
    action: str
    """set | start | advance | rollback | complete | pause | resume."""
    percent: int
    """Share of the new system after the action."""
    previous: int
    """Share before it."""
    actor: str
    reason: str = ""
    gates: tuple[Mapping[str, Any], ...] = ()
    """Gate results the action was decided on (``GateResult.to_dict()``)."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"time": iso(self.time), "action": self.action, "percent": self.percent,
                               "previous": self.previous, "actor": self.actor}  # fmt: skip
        if self.reason:
            out["reason"] = self.reason
        if self.gates:
            out["gates"] = [dict(g) for g in self.gates]
        return out

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Entry:
        return cls(time=parse_iso(str(raw["time"])), action=str(raw["action"]), percent=int(raw["percent"]),
                   previous=int(raw.get("previous", 0)), actor=str(raw.get("actor", "")),
                   reason=str(raw.get("reason", "")), gates=tuple(raw.get("gates", ())))  # fmt: skip


@dataclass(frozen=True, slots=True)
class CutoverState:
    percent: int = 0
    phase: str = "idle"
    paused: bool = False
    steps: tuple[int, ...] = ()
    interval_s: float = 0.0
    gates: str = ""
    old: str | None = None
    new: str | None = None
    walker: str = ""
    actor: str = ""
    updated: float | None = None
    history: tuple[Entry, ...] = field(default_factory=tuple)

    def record(self, entry: Entry, **changes: Any) -> CutoverState:
        """A copy with ``entry`` appended (history is append-only), ``percent`` and ``changes`` applied."""
        return replace(self, percent=entry.percent, actor=entry.actor, updated=entry.time,
                       history=(*self.history, entry), **changes)  # fmt: skip

    def to_annotations(self) -> dict[str, str]:
        history = [e.to_dict() for e in self.history[-MAX_HISTORY:]]
        out = {"percent": str(self.percent), "phase": self.phase, "paused": str(self.paused).lower(),
               "plan": ",".join(map(str, self.steps)), "interval": f"{self.interval_s:g}",
               "gates": self.gates,
               "old": self.old or "", "new": self.new or "", "walker": self.walker, "actor": self.actor,
               "updated": iso(self.updated) if self.updated is not None else "",
               "history": json.dumps(history, separators=(",", ":"))}  # fmt: skip
        return {PREFIX + k: v for k, v in out.items()}


def from_annotations(annotations: Mapping[str, str], where: str = "the traffic object") -> CutoverState:
    """The state stored in ``annotations``; the idle state when there is none."""
    a = {k.removeprefix(PREFIX): v for k, v in annotations.items() if k.startswith(PREFIX)}
    if not a:
        return CutoverState()
    try:
        return CutoverState(
            percent=int(a.get("percent") or 0), phase=a.get("phase") or "idle",
            paused=a.get("paused") == "true",
            steps=tuple(int(s) for s in (a.get("plan") or "").split(",") if s),
            interval_s=float(a.get("interval") or 0), gates=a.get("gates", ""), old=a.get("old") or None,
            new=a.get("new") or None, walker=a.get("walker", ""), actor=a.get("actor", ""),
            updated=parse_iso(a["updated"]) if a.get("updated") else None,
            history=tuple(Entry.from_dict(e) for e in json.loads(a.get("history") or "[]")),
        )  # fmt: skip
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(
            f"the cutover annotations on {where} are unreadable: {exc}",
            hint=f"inspect the {PREFIX}* annotations; remove them to start over (the weights stay)",
        ) from None


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_iso(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
