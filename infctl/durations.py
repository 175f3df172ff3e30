"""Durations as every command reads them: ``90s``, ``500ms``, ``10m``, ``1h``; a bare number is seconds.

One parser for every flag and file field that takes a duration (bench, simulate, cutover, sim faults,
router and autoscaler intervals), so a value accepted by one command is accepted by all.
"""

from __future__ import annotations

import math
import re

from infctl.errors import ConfigError

UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
"""Seconds per unit."""
_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m|h)?\s*$")
HINT = "write e.g. 500ms, 90s, 10m or 1h (a bare number is seconds)"


def parse_duration(
    text: str | float, *, what: str = "duration", default_unit: str = "s", positive: bool = False
) -> float:
    """Seconds in ``text``; ConfigError naming ``what`` when it is not a duration (or not > 0 with
    ``positive``)."""
    m = _DURATION.match(str(text))
    value = float(m.group(1)) * UNITS[m.group(2) or default_unit] if m else math.nan
    if not math.isfinite(value):
        raise ConfigError(f"{what}: cannot read {text!r} as a duration", hint=HINT)
    if positive and value <= 0:
        raise ConfigError(f"{what} {text!r}: not a positive duration", hint=HINT)
    return value


def format_duration(seconds: float) -> str:
    """The shortest of ``1h``, ``10m``, ``90s`` that is exact, else seconds (``0.5s``)."""
    for unit, size in (("h", 3600.0), ("m", 60.0), ("s", 1.0)):
        if seconds >= size and (seconds / size).is_integer():
            return f"{int(seconds / size)}{unit}"
    return f"{seconds:g}s"
