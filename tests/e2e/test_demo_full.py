"""The README's first command, whole: `infctl demo` starts the local stack, sends its chat requests and runs
both comparisons through the router's admin API. Slow (about two minutes), so it runs in CI's slow stage;
it exists because a change to the local router's admin token once broke the comparisons unnoticed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from infctl.local.procs import port_is_free


def _free_run(n: int, start: int = 31000, stop: int = 39000) -> int:
    for base in range(start, stop, n):
        if all(port_is_free(p) for p in range(base, base + n)):
            return base
    raise RuntimeError("no run of free ports")


@pytest.mark.slow
def test_the_demo_runs_both_comparisons(tmp_path: Path) -> None:
    base = _free_run(12)
    cmd = [sys.executable, "-m", "infctl", "-o", "json", "demo", "--run-dir", str(tmp_path / "run"),
           "--set", f"local.base_port={base}", "--report", str(tmp_path / "report.html")]  # fmt: skip
    # Under pytest's own 900 s limit, so a stuck demo fails here with what it printed.
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=840)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"infctl demo still running after 840 s: {str(exc.stderr)[-2000:]}") from None
    assert done.returncode == 0, done.stderr[-2000:]
    data = json.loads(done.stdout)
    names = [s["name"] for s in data["scenarios"]]
    assert len(names) == 2, names
    for scenario in data["scenarios"]:
        failed = next(r for r in scenario["rows"] if r[0] == "failed requests")
        assert failed[1:3] == ["0", "0"], scenario
    assert (tmp_path / "report.html").stat().st_size > 0
