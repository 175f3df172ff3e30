"""``infctl simulate compare`` as a user runs it: tables side by side, complete JSON, files bench reads."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from infctl.cli.main import _register, app
from infctl.sim.calib_profile import write_profile_file
from infctl.sim.cluster.scenarios import ScenarioSize, build_scenarios, run_scenario
from infctl.sim.cluster.scenarios.catalog import DEEPSEEK_V3_H200
from infctl.sim.profiles import get_profile


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


CLOCK = re.compile(r'^\s*"(started_at|finished_at|wall_s|speedup)": .*$', re.M)
"""Wall-clock fields of a result: the only bytes two runs of one seed may differ in."""


def test_one_seed_prints_what_compare_printed_before_seeds(runner: CliRunner, small: list[str]) -> None:
    argv = ["simulate", "compare", "kv-tier", *small, "--seed", "3"]
    plain, one = (
        runner.invoke(app, [*argv, "-o", "json"]),
        runner.invoke(app, [*argv, "-o", "json", "--seeds", "1"]),
    )
    assert plain.exit_code == 0 and one.exit_code == 0, one.output
    assert CLOCK.sub("", one.stdout) == CLOCK.sub("", plain.stdout)
    # The structure compare printed before --seeds existed: each scenario one run's to_dict(), nothing more.
    size = ScenarioSize(engines=8, requests=40, seed=3, profile=get_profile(small[5]), trace=Path(small[7]))
    direct = {"scenarios": [run_scenario(sc).to_dict() for sc in build_scenarios(["kv-tier"], size)]}
    today = json.dumps(direct, indent=2, default=str) + "\n"
    assert CLOCK.sub("", one.stdout) == CLOCK.sub("", today)
    table, table_one = runner.invoke(app, argv), runner.invoke(app, [*argv, "--seeds", "1"])
    assert table.stdout == table_one.stdout and "mean (min-max)" not in table_one.stdout


def test_seeds_give_means_ranges_and_wins(runner: CliRunner, small: list[str], tmp_path: Path) -> None:
    argv = ["simulate", "compare", "prefix", *small, "--seed", "4", "--seeds", "2"]
    out = runner.invoke(app, [*argv, "--save", str(tmp_path / "r")], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    assert "mean (min-max) over seeds 4-5" in out.stdout
    assert re.search(r"\d+\.\d% \(\d+\.\d-\d+\.\d\)", out.stdout), out.stdout  # "16.4% (9.7-22.1)"
    assert "infctl cache_aware vs random: prefix-cache hit rate higher in 2 of 2 seeds" in out.stdout
    # infctl's arm (the second here, not the last) is judged against every other arm.
    assert "infctl cache_aware vs round robin: prefix-cache hit rate higher in" in out.stdout
    assert "round robin vs random: prefix-cache hit rate higher in" in out.stdout
    assert "prefix: random (seed 5, 2 of 2)" in out.stderr
    names = {p.name for p in (tmp_path / "r").glob("*.json")}
    assert names == {
        f"prefix--{a}--seed-{s}.json" for a in ("random", "infctl-cache-aware", "round-robin") for s in (4, 5)
    }

    data = json.loads(runner.invoke(app, [*argv, "-o", "json"]).stdout)["scenarios"][0]
    assert data["seeds"] == [4, 5] and [len(d["results"]) for d in data["per_seed"]] == [3, 3]
    hit = data["summary"]["random"]["prefix-cache hit rate"]
    assert len(hit["values"]) == 2 and hit["min"] <= hit["mean"] <= hit["max"] <= 1
    assert (
        next(m for m in data["measures"] if m["measure"] == data["headline"])["values"]["random"]
        == hit["mean"]
    )


def test_seeds_are_at_least_one(runner: CliRunner) -> None:
    res = runner.invoke(app, ["simulate", "compare", "prefix", "--seeds", "0"])
    assert res.exit_code == 2 and "--seeds" in res.output
