"""The policy's memory across daemon restarts (a rolling upgrade, an evicted pod), as plain JSON (pure).

The daemon saves its :class:`~infctl.autoscaler.snapshot.ScalerState` after every decision and reads it
back when it starts, so a restart keeps the cooldowns, the scale-down floor, panic mode and the forecast's
level, trend and learned SLO headroom: a cold forecast only reacts for a whole window, and a fresh one
forgets a morning's learning. Times are policy-clock seconds (monotonic, different in every process), so
the record also carries the wall clock it was saved at, and :func:`restore` moves every time onto the new
clock.

The daemon's recent start-up times ride along (:func:`startups`): a start-up slower than the router's hold
stays flagged after a restart, until newer ones replace it.

Not restored: what must be watched without a gap. The high and low windows and a unit's idle time start
again (no scale decision rests on a stretch the daemon did not see), and after a gap of the forecast's
window or more the forecast starts cold (its level would be one reading).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, fields, replace
from typing import Any

from infctl.autoscaler.snapshot import ForecastState, ScalerState, UnitState

VERSION = 1
"""The record's format; a record of another version is not read (the daemon starts cold)."""
UNIT_TIMES = ("last_scale_at", "settled_at")
"""UnitState fields that are policy-clock times, moved onto the new clock."""
UNIT_WATCHED = ("high_since", "low_since", "idle_since")
"""UnitState fields that must be observed without a gap: dropped."""
FORECAST_TIMES = ("at", "since", "panic_until")
"""ForecastState fields that are policy-clock times."""
SERIES = {"recommendations": int, "needs": int, "recent": float}
"""(time, value) series, with the type of their values."""


class BadMemory(ValueError):
    """A saved record that cannot be read as this version's memory."""


def record(
    state: ScalerState, now: float, wall: float, startups: Mapping[str, tuple[float, ...]] | None = None
) -> dict[str, Any]:
    """``state`` as JSON-ready data, stamped with the policy clock ``now`` and the wall clock ``wall``, with
    each unit's recent start-ups (seconds) when given."""
    return {
        "version": VERSION,
        "saved_at": now,
        "saved_wall": wall,
        "units": {unit: asdict(s) for unit, s in state.units},
        "startups": {unit: list(times) for unit, times in (startups or {}).items()},
    }


def startups(data: Any) -> dict[str, tuple[float, ...]]:
    """The recent start-ups (seconds) per unit a record carries; none from an older or unreadable one."""
    raw = data.get("startups") if isinstance(data, dict) else None
    try:
        return {str(u): tuple(float(t) for t in times) for u, times in dict(raw or {}).items()}
    except (TypeError, ValueError):
        return {}


def restore(data: Any, now: float, wall: float, forecast_window_s: float | None) -> tuple[ScalerState, float]:
    """The state saved in ``data``, moved onto the clock that reads ``now`` at wall time ``wall``, and the
    gap since it was saved (wall seconds). Raises :class:`BadMemory` for a record it cannot read."""
    if not isinstance(data, dict) or data.get("version") != VERSION:
        version = data.get("version") if isinstance(data, dict) else None
        raise BadMemory(f"not a version {VERSION} autoscaler memory (version {version!r})")
    try:
        saved_at, saved_wall = float(data["saved_at"]), float(data["saved_wall"])
        gap = wall - saved_wall
        if gap < 0:
            raise BadMemory(f"saved {-gap:.0f} s in the future (the clock moved back?)")
        shift = (now - saved_at) - gap
        cold = forecast_window_s is not None and gap >= forecast_window_s
        units = tuple((str(unit), _unit(s, shift, cold)) for unit, s in dict(data["units"]).items())
    except (KeyError, TypeError, ValueError) as err:
        if isinstance(err, BadMemory):
            raise
        raise BadMemory(f"unreadable autoscaler memory: {err!r}") from None
    return ScalerState(units=units), gap


def _unit(raw: dict[str, Any], shift: float, cold: bool) -> UnitState:
    known = {f.name for f in fields(UnitState)}
    if unknown := set(raw) - known:
        raise BadMemory(f"unknown unit fields {sorted(unknown)}")
    values: dict[str, Any] = {k: v for k, v in raw.items() if k not in UNIT_WATCHED}
    for name in UNIT_TIMES:
        values[name] = _moved(values.get(name), shift)
    values["recommendations"] = _series(values.get("recommendations", ()), shift, SERIES["recommendations"])
    values["pending"] = bool(values.get("pending", False))
    forecast = values.pop("forecast", None)
    state = UnitState(**values)
    if forecast is not None and not cold:
        state = replace(state, forecast=_forecast(forecast, shift))
    return state


def _forecast(raw: dict[str, Any], shift: float) -> ForecastState:
    known = {f.name for f in fields(ForecastState)}
    if unknown := set(raw) - known:
        raise BadMemory(f"unknown forecast fields {sorted(unknown)}")
    values = dict(raw)
    for name in FORECAST_TIMES:
        values[name] = _moved(values.get(name), shift)
    values["at"], values["since"] = float(values["at"]), float(values["since"])  # required: no null
    for name in ("needs", "recent"):
        values[name] = _series(values.get(name, ()), shift, SERIES[name])
    for name in ("level", "trend", "slo_scale", "weight", "requests", "size_tokens", "size_requests"):
        if name in values:
            values[name] = float(values[name])
    return ForecastState(**values)


def _moved(t: Any, shift: float) -> float | None:
    return None if t is None else float(t) + shift


def _series(raw: Any, shift: float, kind: type) -> tuple[tuple[float, Any], ...]:
    return tuple((float(t) + shift, kind(v)) for t, v in raw)
