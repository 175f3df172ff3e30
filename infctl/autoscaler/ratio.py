"""Keeping prefill and decode counts inside a prefill:decode ratio band (pure).

Among every pair of counts within both units' bounds whose replica ratio lies in the band, pick the one
that cuts the least capacity below what the signals asked for, then the one closest to it, then the
smaller fleet. Counts are small (tens), so an exhaustive search is exact and cheap.
"""

from __future__ import annotations

from infctl.autoscaler.settings import UnitConfig, in_band


def fit_band(
    wanted: tuple[int, int],
    units: tuple[UnitConfig, UnitConfig],
    band: tuple[float, float],
    floors: tuple[int, int] = (0, 0),
) -> tuple[int, int]:
    """The (prefill units, decode units) pair in ``band`` nearest ``wanted``.

    ``floors`` (schedule floors) are honoured when some pair allows it, else only the units' bounds.
    ``wanted`` itself is returned when it is already in the band.
    """
    p, d = units
    pp, dd = p.per_unit("prefill"), d.per_unit("decode")
    if in_band(wanted[0] * pp, wanted[1] * dd, band):
        return wanted
    for lows in ((max(p.min, floors[0]), max(d.min, floors[1])), (p.min, d.min)):
        best: tuple[tuple[int, int, int], tuple[int, int]] | None = None
        for np in range(lows[0], p.max + 1):
            for nd in range(lows[1], d.max + 1):
                if not in_band(np * pp, nd * dd, band):
                    continue
                cut = max(0, wanted[0] - np) + max(0, wanted[1] - nd)
                moved = abs(np - wanted[0]) + abs(nd - wanted[1])
                key = (cut, moved, np + nd)
                if best is None or key < best[0]:
                    best = (key, (np, nd))
        if best is not None:
            return best[1]
    return wanted  # unreachable for a validated PolicyConfig (a feasible pair always exists)
