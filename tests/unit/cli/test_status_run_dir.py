"""``--run-dir`` naming a file is bad input (exit 2) naming the option: status said "no local releases"
and exited 0, status NAME and delete NAME ended in a NotADirectoryError traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from infctl.cli.main import app

runner = CliRunner()


@pytest.mark.parametrize("args", [["status"], ["status", "demo"], ["delete", "demo"]])
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


def test_a_run_dir_not_created_yet_holds_no_releases(tmp_path: Path) -> None:
    result = runner.invoke(app, ["status", "--run-dir", str(tmp_path / "new")], env={"COLUMNS": "200"})
    assert result.exit_code == 0 and "no local releases" in result.output
