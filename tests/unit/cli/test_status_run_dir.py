"""``--run-dir`` naming a file is bad input (exit 2) naming the option: status said "no local releases"
and exited 0, status NAME, delete NAME and doctor --local NAME ended in a NotADirectoryError traceback
(doctor's exit 0). One rule for every command: infctl.local.paths.resolve_run_dir."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from infctl.cli.main import app

runner = CliRunner()


PROFILES = Path(__file__).resolve().parents[3] / "profiles"
COMMANDS = [
    ["status"],
    ["status", "demo"],
    ["delete", "demo"],
    ["doctor", "--local", "demo"],
    ["autoscaler", "-f", str(PROFILES / "local-demo.yaml")],
]


@pytest.mark.parametrize("args", COMMANDS, ids=[" ".join(a[:2]) for a in COMMANDS])
@pytest.mark.parametrize("under", [False, True])
def test_a_run_dir_that_is_a_file_is_bad_input(tmp_path: Path, args: list[str], under: bool) -> None:
    file = tmp_path / "state.json"
    file.write_text("{}")
    given = file / "releases" if under else file
    result = runner.invoke(app, [*args, "--run-dir", str(given)], env={"COLUMNS": "200"})
    assert result.exit_code == 2, result.output
    assert f"--run-dir {given}: " in result.output and "not a directory" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_the_default_run_dir_is_named_when_it_is_a_file(tmp_path: Path) -> None:
    file = tmp_path / "releases"
    file.write_text("")
    result = runner.invoke(app, ["status"], env={"COLUMNS": "200", "INFCTL_RUN_DIR": str(file)})
    assert result.exit_code == 2 and f"run directory {file}: a file" in result.output
    assert "$INFCTL_RUN_DIR" in result.output


@pytest.mark.parametrize("source", ["env", "flag"])
def test_a_command_that_reads_no_release_ignores_a_file_there(tmp_path: Path, source: str) -> None:
    """doctor --engine-url needs no run directory: it exited 2 on a file at $INFCTL_RUN_DIR before any check.
    doctor of a local profile reads its release there, so still refuses it, naming where it came from."""
    file = tmp_path / "releases"
    file.write_text("")
    env = {"COLUMNS": "200", **({"INFCTL_RUN_DIR": str(file)} if source == "env" else {})}
    flag = ["--run-dir", str(file)] if source == "flag" else []
    with socket.socket() as sock:  # a port nothing listens on: the engine check fails at once
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    result = runner.invoke(app, ["-o", "json", "doctor", "--engine-url", url, *flag], env=env)
    assert result.exit_code == 1, result.output
    assert [r["status"] for r in json.loads(result.output)["results"] if r["name"] == "health"] == ["fail"]
    local = runner.invoke(app, ["doctor", "-f", str(PROFILES / "local-demo.yaml"), *flag], env=env)
    assert local.exit_code == 2 and "not a directory" in local.output, local.output
    assert (f"--run-dir {file}: " if flag else f"run directory {file}: ") in local.output


def test_a_run_dir_not_created_yet_holds_no_releases(tmp_path: Path) -> None:
    result = runner.invoke(app, ["status", "--run-dir", str(tmp_path / "new")], env={"COLUMNS": "200"})
    assert result.exit_code == 0 and "no local releases" in result.output


def test_deploy_names_its_run_dir_when_the_default_is_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stop command compares with the default unchecked: a file there does not fail a good --run-dir."""
    from infctl.cli.deploy import delete_command
    from infctl.config import load_deployment
    from infctl.local import build_plan

    (tmp_path / "plain").write_text("")
    monkeypatch.setenv("INFCTL_RUN_DIR", str(tmp_path / "plain"))
    plan = build_plan(load_deployment(PROFILES / "local-demo.yaml"), is_free=lambda _: True, run_dir=tmp_path)
    assert delete_command(plan) == f"infctl delete local-demo --run-dir {tmp_path}"
