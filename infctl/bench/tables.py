"""Result figures as rows of text, for the CLI's tables and the HTML report (pure formatting, no I/O)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from infctl.bench.compare import Comparison
from infctl.bench.result import BenchResult

Row = tuple[str, ...]
LATENCY_COLUMNS = ("metric", "mean", "p50", "p90", "p99", "max", "count")
STAGE_COLUMNS = (
    "stage",
    "asked req/s",
    "sent req/s",
    "done req/s",
    "TTFT p50",
    "TTFT p99",
    "TPOT p50",
    "failed",
)
SWEEP_COLUMNS = (
    "asked req/s", "sent req/s", "done req/s", "out tok/s", "TTFT p50", "TTFT p99", "TPOT p50", "SLO met",
    "failed",
)  # fmt: skip
COMPARISON_COLUMNS = ("metric", "A", "B", "change")


def ms(d: Mapping[str, Any], key: str) -> str:
    """A millisecond statistic: 2 decimals under 10 ms, 1 above; ``-`` when missing."""
    v = d.get(key)
    return "-" if v is None else f"{v:.1f}" if v >= 10 else f"{v:.2f}"


def num(v: Any, fmt: str = "{:.2f}") -> str:
    return "-" if v is None else fmt.format(v)


def headline_rows(d: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(name, text) pairs summing up a saved result: requests, throughput, goodput, client, server, errors."""
    req, tp, c = d["requests"], d["throughput"], d["client"]
    rows = [
        ("requests", f"{req['completed']} completed, {req['failed']} failed in {num(d['duration_s'])} s"),
        (
            "throughput",
            f"{num(tp['requests_per_s'])} req/s, {num(tp['output_tokens_per_s'], '{:.1f}')} output tok/s, "
            f"{num(tp['total_tokens_per_s'], '{:.1f}')} total tok/s",
        ),
    ]
    if d.get("goodput"):
        g = d["goodput"]
        slo = ", ".join(f"{k.removesuffix('_ms')}<={v:g}ms" for k, v in g["slo"].items())
        rows.append(
            ("goodput", f"{num(g['requests_per_s'])} req/s ({num(g['fraction'], '{:.1%}')} met {slo})")
        )
    if d["tokens"].get("cached_fraction") is not None:
        rows.append(("cached prompt", f"{num(d['tokens']['cached_fraction'], '{:.1%}')} of prompt tokens"))
    rows.append((
        "client",
        f"sent {num(c['achieved_rate'])} req/s (asked {num(c['requested_rate'], '{:g}')}), send lag p99 "
        f"{ms(c['send_lag_ms'], 'p99')} ms, CPU {num(c['cpu_util'], '{:.0%}')}",
    ))  # fmt: skip
    if d.get("server"):
        s = d["server"]
        rows.append((
            "server",
            f"prefix-cache hit rate {num(s['prefix_cache_hit_rate'], '{:.1%}')}, preemptions "
            f"{s['preemptions']:g}, queue peak {s['queue_peak']:g}",
        ))  # fmt: skip
    if d["errors"]["total"]:
        examples = d["errors"].get("examples", {})
        rows.append((
            "errors",
            "; ".join(f"{k} {v}" + (f" ({examples[k][:80]})" if examples.get(k) else "")
                      for k, v in d["errors"]["by_kind"].items()),
        ))  # fmt: skip
    return rows


def latency_rows(d: Mapping[str, Any]) -> list[Row]:
    out = []
    for name in ("ttft", "tpot", "itl", "e2e"):
        m = d[name]
        out.append((name.upper(), *(ms(m, k) for k in ("mean", "p50", "p90", "p99", "max")), str(m["count"])))
    return out


def stage_rows(stages: Sequence[Mapping[str, Any]]) -> list[Row]:
    return [
        (s["label"], num(s["requested_rate"], "{:g}"), num(s["achieved_rate"]),
         num(s["throughput"]["requests_per_s"]), ms(s["ttft"], "p50"), ms(s["ttft"], "p99"),
         ms(s["tpot"], "p50"), str(s["requests"]["failed"]))
        for s in stages
    ]  # fmt: skip


def sweep_rows(runs: Sequence[BenchResult]) -> list[Row]:
    out: list[Row] = []
    for r in runs:
        s = r.summary
        out.append((
            num(r.client.requested_rate, "{:g}"), num(r.client.achieved_rate), num(s.request_throughput),
            num(s.output_throughput, "{:.1f}"), f"{s.ttft['p50'] * 1e3:.1f}", f"{s.ttft['p99'] * 1e3:.1f}",
            f"{s.tpot['p50'] * 1e3:.2f}", num(s.good_fraction, "{:.0%}"), str(s.failed),
        ))  # fmt: skip
    return out


def comparison_rows(c: Comparison) -> list[tuple[str, str, str, str, bool | None]]:
    """(metric, A, B, change, better): change is ``-90.0%``, with ``(x10.00)`` for large ratios."""
    out = []
    for r in c.rows:
        unit = f" {r.unit}" if r.unit else ""
        a = "-" if r.a is None else f"{_value(r.a)}{unit}"
        b = "-" if r.b is None else f"{_value(r.b)}{unit}"
        if r.delta_pct is None:
            change = "-"
        else:
            big = r.ratio is not None and (r.ratio >= 1.5 or r.ratio <= 0.67)
            change = f"{r.delta_pct:+.1f}%" + (f" (x{r.ratio:.2f})" if big and r.ratio is not None else "")
        out.append((r.metric, a, b, change, r.better))
    return out


def _value(v: float) -> str:
    """``79,630`` rather than ``7.963e+04``; four significant digits below 1,000."""
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}"
