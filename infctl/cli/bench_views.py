"""Rich views of bench results: the live progress line, one result, a sweep, a comparison.

Shared by ``infctl bench`` and every command that prints a bench-schema result (``demo``, ``simulate``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from infctl.bench import Progress, tables
from infctl.bench.compare import Comparison
from infctl.bench.sweep import MaxRateResult, SweepResult
from infctl.cli.output import simple_table


def progress_view(p: Progress) -> RenderableType:
    want = f"{p.requested_rate:g}" if p.requested_rate is not None else "-"
    errors = ", ".join(f"{k} {v}" for k, v in p.errors.items()) or "none"
    return Text.from_markup(
        f"[bold]stage {p.stage + 1}/{p.stages}[/] ({p.stage_label})  {p.elapsed_s:6.1f} s\n"
        f"rate {p.achieved_rate:7.1f} req/s (asked {want})  in flight {p.in_flight}  "
        f"sent {p.sent}  done {p.completed}  failed {p.failed}  send lag {p.send_lag_ms:.1f} ms\n"
        f"errors: {errors}"
    )


def result_view(d: dict[str, Any], saved: list[Path] | None = None) -> RenderableType:
    head = Table(title=f"infctl bench: {d['metadata']['label']}", title_justify="left", show_header=False)
    head.add_column(style="bold")
    head.add_column()
    for name, text in tables.headline_rows(d):
        head.add_row(name, text)
    parts: list[RenderableType] = [
        head,
        simple_table("latency (ms)", tables.LATENCY_COLUMNS, tables.latency_rows(d), numbers=True),
    ]
    if len(d.get("stages", [])) > 1:
        stages = tables.stage_rows(d["stages"])
        parts.append(simple_table("stages", tables.STAGE_COLUMNS, stages, numbers=True))
    parts += [Text(f"warning: {w}", style="yellow") for w in d.get("warnings", [])]
    parts += [Text(f"wrote {p}", style="dim") for p in saved or []]
    return Group(*parts)


def sweep_view(outcome: SweepResult | MaxRateResult) -> RenderableType:
    if isinstance(outcome, SweepResult):
        return simple_table("rate sweep", tables.SWEEP_COLUMNS, tables.sweep_rows(outcome.runs), numbers=True)
    t = simple_table(
        "highest rate meeting the SLOs",
        tables.SWEEP_COLUMNS,
        tables.sweep_rows([p.result for p in outcome.probes]),
        numbers=True,
    )
    best = f"{outcome.best_rate:.3g} req/s" if outcome.best_rate else "none of the rates tried"
    return Group(
        t, Text(f"highest rate with >= {outcome.attainment:.0%} good requests: {best}", style="bold")
    )


def comparison_view(c: Comparison) -> Table:
    # Named by column: "B vs A" above columns A, B read as A = B's label, the runs swapped.
    t = Table(title=f"A: {c.a_label}\nB: {c.b_label} (change: B against A)", title_justify="left")
    for i, col in enumerate(tables.COMPARISON_COLUMNS):
        t.add_column(col, justify="left" if i == 0 else "right")
    for metric, a, b, change, better in tables.comparison_rows(c):
        t.add_row(metric, a, b, Text(change, style="green" if better else "red" if better is False else ""))
    return t
