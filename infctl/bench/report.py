"""The HTML report: summary tables and inline SVG plots (TTFT CDF, latency and throughput over time; for a
sweep, latency and throughput against the rate). One self-contained file, no JavaScript."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

from infctl.bench import tables
from infctl.bench.metrics import request_metrics
from infctl.bench.result import BenchResult, timeseries_dict
from infctl.bench.svg import Series, chart

MAX_DOTS = 2000

_STYLE = """
body { font-family: sans-serif; margin: 2em; color: #222; max-width: 1400px; }
table { border-collapse: collapse; margin: 1em 0; font-size: 13px; }
td, th { border: 1px solid #ddd; padding: 4px 8px; text-align: right; }
td:first-child, th:first-child { text-align: left; }
.warn { color: #b35900; } .plots { display: flex; flex-wrap: wrap; gap: 12px; }
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


def result_plots(result: BenchResult) -> list[str]:
    ok = [r for r in result.requests if r.error is None and r.chunk_times]
    ttfts = sorted((r.chunk_times[0] - r.sent_s) * 1e3 for r in ok)
    n = len(ttfts)
    cdf = Series("TTFT", ttfts, [(i + 1) / n for i in range(n)], kind="step")
    stride = max(1, len(ok) // MAX_DOTS)
    sample = ok[::stride]
    t0 = min((r.sent_s for r in result.requests), default=0.0)
    per = [request_metrics(r) for r in sample]
    lat = [
        Series("TTFT", [r.sent_s - t0 for r in sample], [(m.ttft_s or 0) * 1e3 for m in per], kind="dots"),
        Series("E2E", [r.sent_s - t0 for r in sample], [(m.e2e_s or 0) * 1e3 for m in per], kind="dots"),
    ]
    ts: dict[str, Any] = timeseries_dict(result.requests, result.summary.duration_s)
    return [
        chart("TTFT CDF", [cdf], x_label="TTFT (ms)", y_label="fraction of requests"),
        chart("latency over time", lat, x_label="send time (s)", y_label="ms"),
        chart("requests over time", [Series("completed/s", ts["t"], ts["requests_per_s"]),
                                     Series("failed/s", ts["t"], [e / ts["bucket_s"] for e in ts["errors"]])],
              x_label="time (s)", y_label="requests/s"),
        chart("output tokens over time", [Series("output tok/s", ts["t"], ts["output_tokens_per_s"])],
              x_label="time (s)", y_label="tokens/s"),
    ]  # fmt: skip


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


def comparison_html(
    title: str, sections: Sequence[tuple[str, Sequence[Sequence[str]], Sequence[BenchResult]]]
) -> str:
    """One page for side-by-side runs: per section, the comparison rows and each run's plots."""
    parts: list[str] = []
    for name, rows, runs in sections:
        parts.append(f"<h2>{escape(name)}</h2>")
        labels = [r.metadata.label for r in runs]
        parts.append(_table(["measure", *labels, "change", "seed reported"], rows))
        for run in runs:
            parts.append(
                f"<h3>{escape(run.metadata.label)}</h3><div class='plots'>{''.join(result_plots(run))}</div>"
            )
    return _page(title, "".join(parts))
