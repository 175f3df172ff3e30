"""The HTML report: summary tables and inline SVG plots. One self-contained file, no JavaScript.

Latency is drawn one chart per measure (TTFT, TPOT, ITL, E2E): the distribution (CDF) of every run on the
page overlaid on one log-scale axis, with each run's p50 and p99 marked, so runs are compared on the same
chart and a 20 ms TTFT is as readable as a 760 ms E2E. Throughput over time follows, every run on one chart;
a sweep draws latency and throughput against the rate."""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape
from typing import Any

from infctl.bench import tables
from infctl.bench.metrics import request_metrics
from infctl.bench.result import BenchResult, timeseries_dict
from infctl.bench.svg import Marker, Series, chart

MAX_DOTS = 2000

_STYLE = """
body { font-family: sans-serif; margin: 2em; color: #222; max-width: 1400px; }
table { border-collapse: collapse; margin: 1em 0; font-size: 13px; }
td, th { border: 1px solid #ddd; padding: 4px 8px; text-align: right; }
td:first-child, th:first-child { text-align: left; }
.warn { color: #b35900; } .plots { display: flex; flex-wrap: wrap; gap: 12px; }
.note { max-width: 60em; color: #444; }
"""


def _table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{escape(str(v))}</td>" for v in r) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _page(title: str, body: str) -> str:
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{escape(title)}</title>"
        f"<style>{_STYLE}</style></head><body><h1>{escape(title)}</h1>{body}</body></html>\n"
    )


def result_html(result: BenchResult) -> str:
    d = result.to_dict(timeseries=False)
    parts = [
        _table(("", ""), tables.headline_rows(d)),
        _table(tables.LATENCY_COLUMNS, tables.latency_rows(d)),
    ]
    if len(d["stages"]) > 1:
        parts.append(_table(tables.STAGE_COLUMNS, tables.stage_rows(d["stages"])))
    parts += [f"<p class='warn'>warning: {escape(w)}</p>" for w in d["warnings"]]
    parts.append(f"<div class='plots'>{''.join(result_plots(result))}</div>")
    meta = d["metadata"]
    about = f"{meta['url']}, model {meta['model']}, {meta['started_at']}, infctl {meta['infctl_version']}"
    parts.append(f"<p><small>{escape(about)}</small></p>")
    return _page(f"infctl bench: {result.label}", "".join(parts))


MEASURES = ("TTFT", "TPOT", "ITL", "E2E")
"""The latency measures drawn, one chart each."""
MARKED = ("p50", "p99")
"""The percentiles marked on each run's distribution (the summary's own values, as in the tables)."""


def result_plots(result: BenchResult) -> list[str]:
    """One run's charts: :func:`latency_charts` and :func:`throughput_charts` of it alone."""
    return [*latency_charts([result]), *throughput_charts([result])]


def latency_charts(runs: Sequence[BenchResult]) -> list[str]:
    """Per measure, every run's distribution on one shared log axis, its p50 and p99 marked."""
    per_run = [_latencies_ms(r) for r in runs]
    out = []
    for measure in MEASURES:
        series, markers = [], []
        for i, (run, values) in enumerate(zip(runs, per_run, strict=True)):
            ms = sorted(v for v in values[measure] if v > 0)
            cdf = [(k + 1) / len(ms) for k in range(len(ms))]
            series.append(Series(_label(run, i), _thin(ms), _thin(cdf), kind="step"))
            dist = getattr(run.summary, measure.lower())
            marked = {p: dist.percentiles.get(p, math.nan) for p in MARKED}
            markers += [Marker(v * 1e3, p, i) for p, v in marked.items() if math.isfinite(v) and v > 0]
        out.append(
            chart(
                f"{measure} distribution",
                series,
                x_label=f"{measure} (ms, log scale)",
                y_label="fraction of requests",
                log_x=True,
                markers=markers,
            )
        )
    return out


def throughput_charts(runs: Sequence[BenchResult]) -> list[str]:
    """Completed requests and output tokens per second over time, every run on one chart each."""
    series: dict[str, list[Series]] = {"completed requests over time": [], "output tokens over time": []}
    for i, run in enumerate(runs):
        ts: dict[str, Any] = timeseries_dict(run.requests, run.summary.duration_s)
        series["completed requests over time"].append(Series(_label(run, i), ts["t"], ts["requests_per_s"]))
        series["output tokens over time"].append(Series(_label(run, i), ts["t"], ts["output_tokens_per_s"]))
    return [
        chart(
            title, s, x_label="time since the run's first request (s)", y_label=title.split(" over")[0] + "/s"
        )
        for title, s in series.items()
    ]


def _latencies_ms(run: BenchResult) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {m: [] for m in MEASURES}
    for rec in run.requests:
        m = request_metrics(rec)
        for name, value in (("TTFT", m.ttft_s), ("TPOT", m.tpot_s), ("E2E", m.e2e_s)):
            if value is not None:
                out[name].append(value * 1e3)
        out["ITL"] += [v * 1e3 for v in m.itl_s]
    return out


def _label(run: BenchResult, i: int) -> str:
    return run.metadata.label or f"run {i + 1}"


def _thin(values: Sequence[float]) -> list[float]:
    """At most MAX_DOTS points, evenly spaced by rank (the last kept), so a page stays small."""
    if len(values) <= MAX_DOTS:
        return list(values)
    stride = len(values) / MAX_DOTS
    return [values[min(len(values) - 1, round(k * stride))] for k in range(MAX_DOTS)] + [values[-1]]


def sweep_html(outcome: Any) -> str:
    """A sweep (``SweepResult``) or a max-rate search (``MaxRateResult``): one row and one point per run."""
    runs: list[BenchResult] = getattr(outcome, "runs", None) or [p.result for p in outcome.probes]
    runs = sorted(runs, key=lambda r: r.client.requested_rate or 0.0)
    rates = [r.client.requested_rate or 0.0 for r in runs]
    s = [r.summary for r in runs]
    latency = [
        Series("TTFT p50", rates, [x.ttft["p50"] * 1e3 for x in s]),
        Series("TTFT p99", rates, [x.ttft["p99"] * 1e3 for x in s]),
        Series("TPOT p50 x10", rates, [x.tpot["p50"] * 1e4 for x in s]),
    ]
    tput = [Series("completed req/s", rates, [x.request_throughput for x in s])]
    if any(x.goodput is not None for x in s):
        tput.append(Series("goodput req/s", rates, [x.goodput for x in s]))
    body = _table(tables.SWEEP_COLUMNS, tables.sweep_rows(runs))
    best = getattr(outcome, "best_rate", None)
    if hasattr(outcome, "best_rate"):
        body += f"<p><b>highest rate meeting the SLOs: {f'{best:.3g} req/s' if best else 'none'}</b></p>"
    plots = [
        chart("latency vs rate", latency, x_label="requested rate (req/s)", y_label="ms"),
        chart("throughput vs rate", tput, x_label="requested rate (req/s)", y_label="req/s"),
    ]
    body += f"<div class='plots'>{''.join(plots)}</div>"
    return _page("infctl bench: rate sweep", body)


SEED_NOTE = (
    "<p class='note'><b>seed reported</b>: the change the seed, the design brief infctl was started from, "
    "reported for the same comparison on its production fleet: its own models, GPUs and traffic. infctl does "
    "not measure that figure; it is quoted as written (<code>seed_says</code> in "
    "<code>infctl/bench/scenarios.py</code>) so that this run's direction and size of effect can be held "
    "against it. On simulated engines and another workload, compare the direction and rough size, not the "
    "digits.</p>"
)


def comparison_html(
    title: str, sections: Sequence[tuple[str, Sequence[Sequence[str]], Sequence[BenchResult]]]
) -> str:
    """One page for side-by-side runs: per section, the comparison rows, then one chart per measure with
    every run of the section overlaid (:func:`latency_charts`, :func:`throughput_charts`)."""
    parts: list[str] = [SEED_NOTE]
    for name, rows, runs in sections:
        parts.append(f"<h2>{escape(name)}</h2>")
        labels = [r.metadata.label for r in runs]
        parts.append(_table(["measure", *labels, "change", "seed reported"], rows))
        charts = [*latency_charts(runs), *throughput_charts(runs)]
        parts.append(f"<div class='plots'>{''.join(charts)}</div>")
    return _page(title, "".join(parts))
