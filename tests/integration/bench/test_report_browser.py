"""A rendered comparison report opened in headless Chromium: one chart per measure, every run overlaid on it.

Two real benchmark runs against a simulated engine make the page (``comparison_html``, what ``infctl demo``
writes); Chromium loads it with a small script appended that reads the laid-out page (each chart's size, each
series' drawn extent, the markers) into the DOM, and ``--dump-dom`` hands that back. Skipped, with the
reason, where Debian's ``chromium`` is not installed (``apt-get install -y chromium``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from infctl.bench import BenchConfig, BenchResult, run_benchmark, validate_config
from infctl.bench.report import MEASURES, comparison_html, result_html

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

PROBE = """
<script>
const charts = [...document.querySelectorAll('svg.chart')].map(svg => {
  const box = svg.getBoundingClientRect();
  const series = [...svg.querySelectorAll('g.series')].map(g => {
    const shape = g.querySelector('polyline, circle');
    const b = shape ? shape.getBBox() : {width: 0, height: 0};
    return {name: g.dataset.series, points: Number(g.dataset.points), width: b.width, height: b.height};
  });
  const markers = [...svg.querySelectorAll('g.marker')]
    .map(m => [m.dataset.label, Number(m.dataset.seriesIndex)]);
  return {title: svg.dataset.title, xScale: svg.dataset.xScale, width: box.width, height: box.height,
          series, markers};
});
const out = document.createElement('pre');
out.id = 'probe';
out.textContent = JSON.stringify(charts);
document.body.appendChild(out);
</script>
"""


def _config(url: str, label: str, output_tokens: int) -> BenchConfig:
    return validate_config(
        {
            "url": url,
            "label": label,
            "workload": {"kind": "random", "input": {"mean": 64}, "output": {"mean": output_tokens}},
            "load": {"stages": [{"num_requests": 24, "rate": 40.0}]},
            "seed": 1,
        }
    )


def _open(page: str, tmp_path: Path) -> list[dict[str, object]]:
    assert CHROMIUM is not None
    path = tmp_path / "report.html"
    path.write_text(page.replace("</body>", PROBE + "</body>"))
    done = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-background-networking",
            "--disable-extensions",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--virtual-time-budget=5000",
            "--dump-dom",
            path.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    start = dom.index('<pre id="probe">') + len('<pre id="probe">')
    return list(json.loads(dom[start : dom.index("</pre>", start)].replace("&quot;", '"')))


@pytest.fixture
async def two_runs(start_sim) -> list[BenchResult]:  # type: ignore[no-untyped-def]
    url = (await start_sim()).urls[0]
    return [
        await run_benchmark(_config(url, "short replies", 8)),
        await run_benchmark(_config(url, "long", 32)),
    ]


@pytest.mark.skipif(
    CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install -y chromium)"
)
async def test_comparison_report_overlays_every_run_per_measure(
    two_runs: list[BenchResult], tmp_path: Path
) -> None:
    page = comparison_html(
        "infctl demo", [("two output lengths", [("TTFT p50", "1", "2", "+1%", "")], two_runs)]
    )
    assert "seed reported" in page and "design brief" in page  # the page says what the seed's figures are
    charts = {c["title"]: c for c in _open(page, tmp_path)}  # type: ignore[misc]
    for measure in MEASURES:
        chart = charts[f"{measure} distribution"]
        assert chart["xScale"] == "log" and chart["width"] > 100 and chart["height"] > 100
        series = chart["series"]
        assert [s["name"] for s in series] == ["short replies", "long"]  # both runs on one chart
        assert all(s["points"] > 0 and s["width"] > 0 for s in series), series
        dists = [getattr(run.summary, measure.lower()) for run in two_runs]
        drawable = {
            (p, i) for p in ("p50", "p99") for i, d in enumerate(dists) if d.percentiles.get(p, 0) > 0
        }
        assert {(label, i) for label, i in chart["markers"]} == drawable  # each run's p50 and p99
        if measure in ("TTFT", "E2E"):
            assert len(drawable) == 4
    for title in ("completed requests over time", "output tokens over time"):
        assert [s["name"] for s in charts[title]["series"]] == ["short replies", "long"]
    assert len(charts) == len(MEASURES) + 2  # one chart per measure, not one per run


@pytest.mark.skipif(
    CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install -y chromium)"
)
async def test_bench_report_draws_latency_on_log_axes(two_runs: list[BenchResult], tmp_path: Path) -> None:
    charts = {c["title"]: c for c in _open(result_html(two_runs[1]), tmp_path)}  # type: ignore[misc]
    ttft, e2e = charts["TTFT distribution"], charts["E2E distribution"]
    assert ttft["xScale"] == e2e["xScale"] == "log"
    # TTFT is no flat line squeezed under E2E's range: its distribution spans the chart's width.
    assert ttft["series"][0]["width"] > 0.2 * ttft["width"]
