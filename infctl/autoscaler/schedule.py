"""Schedules: time-of-day floors, for a night minimum and for pre-warming before the morning peak (pure).

A window is written ``HH:MM-HH:MM min=N`` with an optional ``unit=NAME`` (``prefill``, ``decode``,
``both``, ``group``, or a Kubernetes target's name); without it, it applies to every unit. The end is
exclusive and a window may cross midnight (``22:00-06:00``). While a window is open the unit never goes
below ``N`` units (groups in group mode). Pre-warming is just a window that opens before the peak::

    "00:00-07:00 min=1"     # night floor
    "07:30-09:00 min=6"     # pre-warm before the 09:00 peak, whatever the signals say yet
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from infctl.errors import ConfigError

_DAY_S = 24 * 3600
_WINDOW = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*-\s*(\d{1,2}):(\d{2})((?:\s+[a-z]+=[A-Za-z0-9_.-]+)+)\s*$")
_KEYS = frozenset({"min", "unit"})


@dataclass(frozen=True, slots=True)
class ScheduleWindow:
    """One daily window with a floor."""

    start_s: int
    """Seconds after midnight the window opens (inclusive)."""
    end_s: int
    """Seconds after midnight the window closes (exclusive); smaller than ``start_s`` across midnight."""
    min: int
    """Fewest units while the window is open."""
    unit: str | None = None
    """The unit it applies to; None for every unit."""

    def is_open(self, time_of_day_s: float) -> bool:
        t = time_of_day_s % _DAY_S
        if self.start_s <= self.end_s:
            return self.start_s <= t < self.end_s
        return t >= self.start_s or t < self.end_s

    def applies_to(self, unit: str) -> bool:
        return self.unit is None or self.unit == unit

    def __str__(self) -> str:
        text = f"{_hhmm(self.start_s)}-{_hhmm(self.end_s)} min={self.min}"
        return text if self.unit is None else f"{text} unit={self.unit}"


def parse_window(text: str) -> ScheduleWindow:
    """``"22:00-06:00 min=2 unit=decode"`` -> :class:`ScheduleWindow`; ConfigError naming the mistake."""
    m = _WINDOW.match(text)
    example = "e.g. '22:00-06:00 min=2' or '07:30-09:00 min=6 unit=decode'"
    if m is None:
        raise ConfigError(f"schedule {text!r}: expected 'HH:MM-HH:MM min=N [unit=NAME]'", hint=example)
    h1, m1, h2, m2 = (int(g) for g in m.group(1, 2, 3, 4))
    if h1 > 24 or h2 > 24 or m1 > 59 or m2 > 59:
        raise ConfigError(f"schedule {text!r}: not a time of day", hint=example)
    fields = dict(pair.split("=", 1) for pair in m.group(5).split())
    unknown = set(fields) - _KEYS
    if unknown or "min" not in fields or not fields["min"].isdigit():
        raise ConfigError(
            f"schedule {text!r}: expected min=N (an integer) and optionally unit=NAME", hint=example
        )
    start, end = (h1 * 3600 + m1 * 60) % _DAY_S, (h2 * 3600 + m2 * 60) % _DAY_S
    if start == end:
        raise ConfigError(f"schedule {text!r}: the window is empty", hint=example)
    return ScheduleWindow(start_s=start, end_s=end, min=int(fields["min"]), unit=fields.get("unit"))


def schedule_floor(
    windows: Iterable[ScheduleWindow], unit: str, time_of_day_s: float | None
) -> tuple[int, ScheduleWindow | None]:
    """The highest floor among the windows open now for ``unit``, and the window that sets it."""
    if time_of_day_s is None:
        return 0, None
    best: tuple[int, ScheduleWindow | None] = (0, None)
    for w in windows:
        if w.applies_to(unit) and w.is_open(time_of_day_s) and w.min > best[0]:
            best = (w.min, w)
    return best


def _hhmm(seconds: int) -> str:
    return f"{seconds // 3600:02d}:{seconds % 3600 // 60:02d}"
