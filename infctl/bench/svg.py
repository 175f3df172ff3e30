"""Small inline SVG charts (lines, steps and dots on linear axes): no JavaScript, no plotting library."""

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
    title: str, series: Sequence[Series], *, x_label: str, y_label: str, width: int = 640, height: int = 300
) -> str:
    """An SVG line/dot chart of ``series``; empty series draw an empty frame with the title."""
    left, right, top, bottom = 72, 20, 30, 45
    pts = [(x, y) for s in series for x, y in zip(s.xs, s.ys, strict=False) if y is not None]
    xs_all = [p[0] for p in pts] or [0.0, 1.0]
    ys_all = [p[1] for p in pts] or [0.0, 1.0]
    xt = nice_ticks(min(xs_all), max(xs_all))
    yt = nice_ticks(min(0.0, min(ys_all)), max(ys_all))
    x0, x1, y0, y1 = xt[0], xt[-1], yt[0], yt[-1]
    pw, ph = width - left - right, height - top - bottom

    def sx(x: float) -> float:
        return left + (x - x0) / ((x1 - x0) or 1.0) * pw

    def sy(y: float) -> float:
        return top + ph - (y - y0) / ((y1 - y0) or 1.0) * ph

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
        f'font-size="11"><text x="{left}" y="18" font-size="13" font-weight="bold">{escape(title)}</text>'
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
        out.append(f'<rect x="{lx}" y="{top + 6}" width="10" height="10" fill="{color}"/>')
        out.append(f'<text x="{lx + 14}" y="{top + 15}">{escape(s.name)}</text>')
    out.append("</svg>")
    return "".join(out)
