"""Tables never cut a figure short on a narrow terminal or a pipe (rich's default overflow is an ellipsis)."""

from __future__ import annotations

from rich.console import Console

from infctl.cli.output import simple_table


def test_a_figure_too_wide_for_its_column_folds_instead_of_being_cut() -> None:
    console = Console(width=40, record=True)
    row = ("GPU-hours", "3.35 (3.31-3.39) (-44%)", "1.82 (1.76-1.95)")
    console.print(simple_table("t", ["measure", "a", "b"], [row], numbers=True))
    text = console.export_text()
    assert "…" not in text
    cell = "".join(line.split("│")[2] for line in text.splitlines() if line.count("│") == 4)
    assert "".join(cell.split()) == "3.35(3.31-3.39)(-44%)"  # all of it, over several lines
