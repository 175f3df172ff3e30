"""Failure injection for simulated engines: parsed from ``--fault`` at start, changed at runtime.

Spec strings (``--fault`` is repeatable; the same strings work in ``POST /admin/faults``):

=======================  ===========================================================================
``crash-after=30s``      the instance dies abruptly after 30 wall seconds (listener closed, every open
                         connection reset); ``crash-after=0`` crashes at once. Units: ms, s, m, h; bare = s.
``error-rate=0.2:503``   20% of generation requests fail with status 503 and the engine's error body.
``slowdown=3``           every engine step takes 3x longer.
``hang``                 the engine stops stepping: requests are accepted and never answered.
``disconnect-after=5``   generation responses are cut (connection reset) after 5 tokens.
``health=fail``          ``/health`` (and SGLang ``/health_generate``) answer 503.
=======================  ===========================================================================

The admin API takes the same faults as JSON, either ``{"specs": ["slowdown=3", ...]}`` or fields of
:class:`FaultPlan` (``{"error_rate": 0.2, "error_status": 503, "hang": true}``); ``GET`` shows the current
faults and ``DELETE`` clears them all.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from infctl import durations
from infctl.errors import ConfigError

_HINT = (
    "use e.g. --fault crash-after=30s, error-rate=0.2:503, slowdown=3, hang, disconnect-after=5, health=fail"
)


@dataclass(frozen=True)
class FaultPlan:
    """A set of faults. Every field's default means "no fault"."""

    crash_after: float | None = None
    """Wall seconds after start (or after being set at runtime) when the instance crashes."""
    error_rate: float = 0.0
    """Fraction (0..1) of generation requests answered with ``error_status``."""
    error_status: int = 503
    """HTTP status of injected errors."""
    slowdown: float = 1.0
    """Factor applied to every step's duration."""
    hang: bool = False
    """The engine stops stepping; requests wait forever."""
    disconnect_after: int | None = None
    """Cut every generation response after this many tokens."""
    health_fail: bool = False
    """Health endpoints answer 503."""

    def merged(self, other: Mapping[str, Any]) -> FaultPlan:
        return replace(self, **other)

    def active(self) -> dict[str, Any]:
        """Only the fields that differ from "no fault" (what ``GET /admin/faults`` shows)."""
        default = FaultPlan()
        return {k: v for k, v in asdict(self).items() if getattr(default, k) != v}


def parse_duration(text: str) -> float:
    return durations.parse_duration(text, what="--fault")


def parse_fault(spec: str) -> dict[str, Any]:
    """One ``--fault`` string to the :class:`FaultPlan` fields it sets."""
    key, _, value = spec.strip().partition("=")
    key = key.strip().lower().replace("_", "-")
    try:
        if key == "crash-after":
            return {"crash_after": parse_duration(value or "0")}
        if key == "error-rate":
            rate, _, status = value.partition(":")
            out: dict[str, Any] = {"error_rate": float(rate)}
            if status:
                out["error_status"] = int(status)
            if not 0.0 <= out["error_rate"] <= 1.0 or not 400 <= out.get("error_status", 503) <= 599:
                raise ValueError
            return out
        if key == "slowdown":
            factor = float(value)
            if factor <= 0:
                raise ValueError
            return {"slowdown": factor}
        if key == "hang":
            return {"hang": value.lower() not in ("false", "0", "off")}
        if key == "disconnect-after":
            return {"disconnect_after": int(value)}
        if key == "health":
            if value.lower() not in ("fail", "ok"):
                raise ValueError
            return {"health_fail": value.lower() == "fail"}
    except ValueError:
        raise ConfigError(f"invalid fault value in {spec!r}", hint=_HINT) from None
    raise ConfigError(f"unknown fault {spec!r}", hint=_HINT)


def parse_faults(specs: Iterable[str]) -> FaultPlan:
    plan = FaultPlan()
    for spec in specs:
        plan = plan.merged(parse_fault(spec))
    return plan


def plan_update(body: object) -> dict[str, Any]:
    """The fields a ``POST /admin/faults`` body sets; raises ConfigError on anything else."""
    if not isinstance(body, dict):
        raise ConfigError("the body must be a JSON object", hint=_HINT)
    update: dict[str, Any] = {}
    specs = body.get("specs", [])
    if isinstance(specs, str):
        specs = [specs]
    for spec in specs:
        update.update(parse_fault(str(spec)))
    names = {f.name for f in fields(FaultPlan)}
    for key, value in body.items():
        if key == "specs":
            continue
        if key not in names:
            raise ConfigError(f"unknown fault field {key!r}", hint=f"fields: {', '.join(sorted(names))}")
        update[key] = value
    try:
        FaultPlan().merged(update)
    except TypeError as exc:  # pragma: no cover - replace() only raises for unknown names
        raise ConfigError(str(exc)) from None
    return update


class FaultState:
    """The live faults of one instance. The driver and the HTTP layer read it on every step/request."""

    def __init__(self, plan: FaultPlan, *, seed: int = 0) -> None:
        self._rng = random.Random(seed)
        self._crash_timer: asyncio.TimerHandle | None = None
        self.on_crash: Callable[[], None] | None = None
        """Set by the instance: what crashing means."""
        self.resumed = asyncio.Event()
        """Set whenever the engine is not hung; the driver waits on it."""
        self.plan = FaultPlan()
        self.set(plan)

    def set(self, plan: FaultPlan) -> None:
        self.plan = plan
        if plan.hang:
            self.resumed.clear()
        else:
            self.resumed.set()

    def update(self, fields_: Mapping[str, Any]) -> None:
        self.set(self.plan.merged(fields_))
        if "crash_after" in fields_:
            self.arm_crash()

    def clear(self) -> None:
        self.set(FaultPlan())
        if self._crash_timer is not None:
            self._crash_timer.cancel()
            self._crash_timer = None

    def arm_crash(self) -> None:
        """(Re)start the crash countdown; needs a running loop."""
        if self._crash_timer is not None:
            self._crash_timer.cancel()
            self._crash_timer = None
        delay = self.plan.crash_after
        if delay is not None and self.on_crash is not None:
            self._crash_timer = asyncio.get_running_loop().call_later(delay, self.on_crash)

    def injected_error(self) -> int | None:
        """The status to fail this request with, or None."""
        p = self.plan
        if p.error_rate > 0 and self._rng.random() < p.error_rate:
            return p.error_status
        return None

    def close(self) -> None:
        if self._crash_timer is not None:
            self._crash_timer.cancel()
            self._crash_timer = None
