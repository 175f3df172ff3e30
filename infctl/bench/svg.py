"""Small inline SVG charts (lines, steps and dots on linear or log axes, with labelled markers): no
JavaScript, no plotting library.

Each chart is an ``<svg class="chart">`` whose ``data-title``, ``data-x-scale`` and ``data-y-scale`` say what
it draws, each series a ``<g class="series" data-series="NAME">`` and each marker a ``<g class="marker">``, so
a page's charts can be checked by what they contain (tests open reports in a headless browser)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from typing import Literal

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b")


@dataclass(frozen=True)
class Series:
    name: str
    xs: Sequence[float]
    ys: Sequence[float | None]
    kind: Literal["line", "dots", "step"] = "line"


@dataclass(frozen=True)
class Marker:
    """A vertical line at ``x`` labelled ``label`` (a percentile), in the colour of series ``series``."""

    x: float
    label: str
    series: int = 0


def log_ticks(lo: float, hi: float) -> list[float]:
    """Tick values covering [lo, hi] (both > 0) on a log axis: powers of ten, with 2 and 5 between them
    when the range spans fewer than three decades."""
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    if last == first:
        last += 1
    steps = (1,) if last - first >= 3 else (1, 2, 5)
    ticks = [m * 10.0**e for e in range(first, last + 1) for m in steps]
    inner = [t for t in ticks if lo <= t <= hi]
    below = [t for t in ticks if t < lo][-1:] or [10.0**first]
    above = [t for t in ticks if t > hi][:1] or [10.0**last]
    return sorted({*below, *inner, *above})


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About ``n`` round tick values covering [lo, hi] (1, 2 or 5 times a power of ten apart)."""
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    return [start + i * step for i in range(math.ceil((hi - start) / step) + 1)]


def _fmt(v: float) -> str:
    if abs(v) >= 1e6:
        return f"{v:.2e}"
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}"


def chart(
    title: str,
    series: Sequence[Series],
    *,
    x_label: str,
    y_label: str,
    width: int = 640,
    height: int = 300,
    log_x: bool = False,
    log_y: bool = False,
    markers: Sequence[Marker] = (),
) -> str:
    """An SVG line/dot chart of ``series`` on one pair of axes (every series shares them; a log axis drops
    values <= 0); empty series draw an empty frame with the title."""
    left, right, top, bottom = 72, 20, 44, 45
    series = [_positive(s, log_x, log_y) for s in series]
    pts = [(x, y) for s in series for x, y in zip(s.xs, s.ys, strict=False) if y is not None]
    xs_all = [p[0] for p in pts] + [m.x for m in markers if m.x > 0 or not log_x] or [1.0, 10.0]
    ys_all = [p[1] for p in pts] or [1.0, 10.0]
    xt = log_ticks(min(xs_all), max(xs_all)) if log_x else nice_ticks(min(xs_all), max(xs_all))
    yt = log_ticks(min(ys_all), max(ys_all)) if log_y else nice_ticks(min(0.0, min(ys_all)), max(ys_all))
    fx, fy = (math.log10 if log_x else _same), (math.log10 if log_y else _same)
    x0, x1, y0, y1 = fx(xt[0]), fx(xt[-1]), fy(yt[0]), fy(yt[-1])
    pw, ph = width - left - right, height - top - bottom

    def sx(x: float) -> float:
        return left + (fx(x) - x0) / ((x1 - x0) or 1.0) * pw

    def sy(y: float) -> float:
        return top + ph - (fy(y) - y0) / ((y1 - y0) or 1.0) * ph

    scales = f'data-x-scale="{"log" if log_x else "linear"}" data-y-scale="{"log" if log_y else "linear"}"'
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" data-title="{escape(title)}" {scales} '
        f'width="{width}" height="{height}" font-family="sans-serif" font-size="11">'
        f'<text x="{left}" y="18" font-size="13" font-weight="bold">{escape(title)}</text>'
    ]
    for t in xt:
        out.append(f'<line x1="{sx(t):.1f}" y1="{top}" x2="{sx(t):.1f}" y2="{top + ph}" stroke="#eee"/>')
        out.append(f'<text x="{sx(t):.1f}" y="{top + ph + 15}" text-anchor="middle">{_fmt(t)}</text>')
    for t in yt:
        out.append(f'<line x1="{left}" y1="{sy(t):.1f}" x2="{left + pw}" y2="{sy(t):.1f}" stroke="#eee"/>')
        out.append(f'<text x="{left - 5}" y="{sy(t) + 4:.1f}" text-anchor="end">{_fmt(t)}</text>')
    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>')
    out.append(f'<text x="{left + pw / 2}" y="{height - 8}" text-anchor="middle">{escape(x_label)}</text>')
    out.append(
        f'<text x="14" y="{top + ph / 2}" text-anchor="middle" transform="rotate(-90 14 {top + ph / 2})">'
        f"{escape(y_label)}</text>"
    )
    for i, s in enumerate(series):
        color = PALETTE[i % len(PALETTE)]
        xy = [(sx(x), sy(y)) for x, y in zip(s.xs, s.ys, strict=False) if y is not None]
        out.append(f'<g class="series" data-series="{escape(s.name)}" data-points="{len(xy)}">')
        if s.kind == "dots":
            out += [
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="1.6" fill="{color}" fill-opacity="0.6"/>'
                for x, y in xy
            ]
        elif xy:
            if s.kind == "step":
                xy = [p for a, b in zip(xy, [*xy[1:], xy[-1]], strict=True) for p in (a, (b[0], a[1]))]
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y in xy)
            out.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="1.6"/>')
        lx = left + 10 + i * 150
        out.append(f'<rect x="{lx}" y="{top - 18}" width="10" height="10" fill="{color}"/>')
        out.append(f'<text x="{lx + 14}" y="{top - 9}">{escape(s.name)}</text></g>')
    for m in markers:
        if log_x and m.x <= 0:
            continue
        color, x = PALETTE[m.series % len(PALETTE)], sx(m.x)
        row = top + 12 + 11 * m.series
        out.append(
            f'<g class="marker" data-label="{escape(m.label)}" data-series-index="{m.series}">'
            f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + ph}" stroke="{color}" '
            f'stroke-dasharray="3,3" stroke-width="1"/>'
            f'<text x="{x + 2:.1f}" y="{row}" fill="{color}">{escape(m.label)}</text></g>'
        )
    out.append("</svg>")
    return "".join(out)


def _same(v: float) -> float:
    return v


def _positive(s: Series, log_x: bool, log_y: bool) -> Series:
    """``s`` without the points a log axis cannot show (x or y <= 0)."""
    if not (log_x or log_y):
        return s
    keep = [
        (x, y)
        for x, y in zip(s.xs, s.ys, strict=False)
        if (not log_x or x > 0) and (y is None or not log_y or y > 0)
    ]
    return Series(s.name, [x for x, _ in keep], [y for _, y in keep], s.kind)
