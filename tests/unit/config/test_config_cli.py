"""``infctl validate`` through the real root app."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from infctl.cli.main import _register, app

PROFILES = Path(__file__).resolve().parents[3] / "profiles"


@pytest.fixture(scope="module")
def runner() -> CliRunner:
    if not any(c.name == "validate" for c in app.registered_commands):
        _register()
    return CliRunner()


def test_valid_profile_as_json(runner: CliRunner) -> None:
    result = runner.invoke(app, ["-o", "json", "validate", "-f", str(PROFILES / "deepseek-v3-group.yaml")])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["name"] == "deepseek-v3" and data["mode"] == "group" and data["engine"] == "sglang"
    assert data["replicas"] == {"prefill": 2, "decode": 4}


def test_set_overrides_and_resolved_output(runner: CliRunner) -> None:
    args = [
        "-o",
        "json",
        "validate",
        "-f",
        str(PROFILES / "local-demo.yaml"),
        "--set",
        "replicas=2",
        "--resolved",
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["replicas"] == 2 and data["model"]["sim"]["profile"] == "llama3-8b-h100"


def test_table_output(runner: CliRunner) -> None:
    result = runner.invoke(app, ["validate", "-f", str(PROFILES / "kimi-k2-pool.yaml")])
    assert result.exit_code == 0, result.output
    assert "kimi-k2" in result.stdout and "prefill 2, decode 4" in result.stdout


def test_bad_profile_exits_2_with_location(runner: CliRunner, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "name: x\nmode: aggregated\nreplicas: 0\nmodel: {engine: vllm, model: m}\ntarget: local\n"
        "local: {simulate: false}\n"
    )
    result = runner.invoke(app, ["validate", "-f", str(bad)])
    assert result.exit_code == 2
    err = " ".join(result.stderr.split())  # Rich wraps long lines
    assert f"{bad}:3: replicas: expected an integer >= 1, found 0" in err
    assert "fix:" in err


def test_missing_file_exits_2(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(app, ["validate", "-f", str(tmp_path / "none.yaml")])
    assert result.exit_code == 2 and "none.yaml: file not found" in " ".join(result.stderr.split())


def test_help_teaches_by_example(runner: CliRunner) -> None:
    result = runner.invoke(app, ["validate", "--help"])
    assert result.exit_code == 0 and "--set" in result.stdout and "profiles/" in result.stdout


@pytest.mark.parametrize("command", ["render", "validate"])
def test_a_set_mistakes_hint_is_a_command_that_shows_the_same_error(
    runner: CliRunner, command: str, tmp_path: Path
) -> None:
    """The hint said `infctl validate -f FILE` without the --set that was wrong: pasted, it passed."""
    path = tmp_path / "my profiles" / "demo.yaml"  # a space: the path must be quoted too
    path.parent.mkdir()
    path.write_text((PROFILES / "local-demo.yaml").read_text())
    sets = ["--set", "replicas=0", "--set", "router.policy=cache aware"]
    first = runner.invoke(app, [command, "-f", str(path), *sets])
    assert first.exit_code == 2, first.output
    hint = first.stderr.split("check again with: ", 1)[1].splitlines()[0]
    assert hint.endswith("--set replicas=0 --set 'router.policy=cache aware'"), hint
    words = shlex.split(hint)
    assert words[:3] == ["infctl", "validate", "-f"]
    again = runner.invoke(app, words[1:])
    assert again.exit_code == 2
    assert "replicas" in again.stderr and "cache aware" in again.stderr
    assert again.stderr.split("fix:")[0] == first.stderr.split("fix:")[0]
