"""``infctl simulate compare`` as a user runs it: tables side by side, complete JSON, files bench reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from infctl.cli.main import _register, app
from infctl.sim.calib_profile import write_profile_file
from infctl.sim.cluster.scenarios.catalog import DEEPSEEK_V3_H200


@pytest.fixture(scope="module")
def runner() -> CliRunner:
    if not any(c.name == "validate" for c in app.registered_commands):
        _register()
    return CliRunner()


@pytest.fixture
def small(tmp_path: Path) -> list[str]:
    """A small DeepSeek-V3 (room for a few long prompts) and a short trace with shared prefixes."""
    profile = tmp_path / "dsv3-small.yaml"
    write_profile_file(profile, DEEPSEEK_V3_H200.with_overrides(name="dsv3-small", num_gpu_blocks=2048))
    trace = tmp_path / "t.jsonl"
    rows = [{"timestamp": i * 200, "input_length": 3 * 512, "output_length": 8,
             "hash_ids": [i % 7 * 10, i % 7 * 10 + 1, 1000 + i]} for i in range(60)]  # fmt: skip
    trace.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return ["--engines", "8", "--requests", "40", "--profile", str(profile), "--trace", str(trace)]


def test_json_is_complete_and_saved_arms_compare(runner: CliRunner, small: list[str], tmp_path: Path) -> None:
    out = runner.invoke(
        app,
        ["simulate", "compare", "bucketing", "kv-tier", *small, "-o", "json", "--save", str(tmp_path / "r")],
    )
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert [s["name"] for s in data["scenarios"]] == ["bucketing", "kv-tier"]
    for sc in data["scenarios"]:
        assert sc["headline"] in [m["measure"] for m in sc["measures"]]
        for m in sc["measures"]:
            assert set(m["values"]) == set(sc["arms"])
        head = next(m for m in sc["measures"] if m["measure"] == sc["headline"])
        assert all(v is not None for v in head["values"].values())
        for label in sc["arms"]:
            res = sc["results"][label]
            assert res["schema"] == "infctl.bench.result" and res["requests"]["completed"] == 40
            assert res["simulation"]["profile"] == "dsv3-small"
    bucketing = data["scenarios"][0]
    assert (
        next(m for m in bucketing["measures"] if m["measure"] == "short TTFT p99")["seed_reported"] == "-91%"
    )
    saved = sorted((tmp_path / "r").glob("*.json"))
    assert len(saved) == 2 + 3
    cmp = runner.invoke(app, ["bench", "compare", str(saved[0]), str(saved[1])])
    assert cmp.exit_code == 0, cmp.output


def test_table_puts_arms_and_the_seed_side_by_side(runner: CliRunner, small: list[str]) -> None:
    out = runner.invoke(app, ["simulate", "compare", "prefix-mooncake", *small])
    assert out.exit_code == 0, out.output
    for text in ("random", "cache_aware", "round robin", "seed reported", "60% -> 90%", "prefix-cache hit"):
        assert text in out.output, text


def test_mistakes_are_one_line_with_a_fix(runner: CliRunner, tmp_path: Path) -> None:
    cases = [
        (["simulate", "compare", "fastest"], "unknown scenario"),
        (["simulate", "compare", "kv-tier", "--trace", str(tmp_path / "none.jsonl")], "is missing"),
        (["simulate", "compare", "prefix", "--profile", "h900"], "unknown simulator profile"),
    ]
    for argv, needle in cases:
        res = runner.invoke(app, argv)
        assert res.exit_code == 2, (argv, res.output)
        assert needle in res.output and "fix:" in res.output
