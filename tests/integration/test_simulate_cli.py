"""``infctl simulate run`` as a user runs it: a table, JSON for scripts, a file bench compare reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from infctl.cli.main import _register, app

SMALL = ["--workload", "shared-prefix", "--groups", "4", "--prefix-tokens", "256", "--input-tokens", "32",
         "--output-tokens", "8", "-n", "40", "--request-rate", "20", "--engines", "2"]  # fmt: skip


@pytest.fixture(scope="module")
def runner() -> CliRunner:
    if not any(c.name == "validate" for c in app.registered_commands):
        _register()
    return CliRunner()


def test_table_json_and_compare(runner: CliRunner, tmp_path: Path) -> None:
    table = runner.invoke(app, ["simulate", "run", *SMALL, "--save", str(tmp_path / "ca.json")])
    assert table.exit_code == 0, table.output
    assert "TTFT" in table.output and "GPU-hours" in table.output and "prefix-cache hit rate" in table.output
    out = runner.invoke(app, ["-o", "json", "simulate", "run", *SMALL, "--policy", "round_robin"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["schema"] == "infctl.bench.result" and data["requests"]["completed"] == 40
    assert data["simulation"]["decisions"] == {"round_robin": 40}
    (tmp_path / "rr.json").write_text(out.output)
    cmp = runner.invoke(app, ["bench", "compare", str(tmp_path / "rr.json"), str(tmp_path / "ca.json")])
    assert cmp.exit_code == 0 and "server prefix-cache hit rate" in cmp.output


def test_trace_replay_with_time_scale(runner: CliRunner, tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    lines = [{"timestamp": i * 1000, "input_length": 1024, "output_length": 4, "hash_ids": [1, 2 + i % 2]}
             for i in range(6)]  # fmt: skip
    trace.write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = runner.invoke(
        app, ["-o", "json", "simulate", "run", "--trace", str(trace), "--time-compression", "10"]
    )
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["requests"]["completed"] == 6
    assert data["simulation"]["sim_time_s"] < 1.0  # 5 s of trace replayed ten times faster


def test_mistakes_are_one_line_with_a_fix(runner: CliRunner) -> None:
    cases = [
        (["simulate", "run", "--policy", "{nope"], "--policy: not JSON"),
        (["simulate", "run", "--policy", "fastest"], "unknown preset"),
        (["simulate", "run", "--profile", "h900"], "unknown simulator profile"),
        (["simulate", "run", "--engines", "9", "--autoscale", "--max-engines", "4"], "outside"),
    ]
    for argv, needle in cases:
        res = runner.invoke(app, argv)
        assert res.exit_code == 2, (argv, res.output)
        assert needle in res.output and "fix:" in res.output


def test_pd_and_admission_flags(runner: CliRunner) -> None:
    long = ["--input-tokens", "1500", "--output-tokens", "8", "-n", "30", "--request-rate", "20"]
    out = runner.invoke(app, ["-o", "json", "simulate", "run", *long, "--pd", "1P1D", "--pd-groups", "2",
                              "--pd-mode", "pool", "--cross-group-gbps", "5"])  # fmt: skip
    assert out.exit_code == 0, out.output
    sim = json.loads(out.output)["simulation"]
    assert sim["engines"] == 4 and sim["decisions"] == {"disaggregated": 30}
    assert sim["pd"]["layout"] == "2x1P1D" and sim["pd"]["mode"] == "pool"
    assert sim["pd"]["cross_group_gbps"] == 5 and sim["pd"]["intra_group_gbps"] == 25
    table = runner.invoke(app, ["simulate", "run", *long, "--pd", "1P1D", "--admission-queue", "4"])
    assert table.exit_code == 0, table.output
    assert "disaggregation" in table.output and "admission" in table.output
    bad = runner.invoke(app, ["simulate", "run", "--pd", "1P1D", "--engines", "3"])
    assert bad.exit_code == 2 and "leave --engines out" in bad.output
    helped = runner.invoke(app, ["simulate", "run", "--help"])
    assert "--pd-mode" in helped.output and "--admission-queue" in helped.output
