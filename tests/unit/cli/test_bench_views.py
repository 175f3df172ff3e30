"""How ``infctl bench compare`` shows two runs: which is A and which is B, unmistakably."""

from __future__ import annotations

from rich.console import Console

from infctl.bench.compare import Comparison, Delta
from infctl.cli.bench_views import comparison_view


def test_the_title_names_each_column_by_its_run() -> None:
    """The title was "B's label vs A's label" over columns A, B: the first label read as column A."""
    row = Delta("TTFT p50", "ms", 100.0, 80.0, -20.0, 0.8, True)
    view = comparison_view(Comparison(a_label="round_robin", b_label="cache_aware", rows=[row]))
    console = Console(width=120, record=True)
    console.print(view)
    text = console.export_text()
    assert "A: round_robin" in text and "B: cache_aware" in text
    assert text.index("A: round_robin") < text.index("B: cache_aware")
