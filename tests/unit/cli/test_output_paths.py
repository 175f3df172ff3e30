"""An output path that cannot be written is bad input, said before the work that fills it (docs/cli.md:
exit 2, one red line, nothing on stdout, nothing created). Before, bench and sim calibrate contacted the
server first (exit 1 for the connection, or the whole run lost to the typo), simulate run named its
temporary file, and render -d onto a file, or deploy into a run directory under one, ended in a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from infctl.cli.main import app

PROFILES = Path(__file__).resolve().parents[3] / "profiles"
DOWN = "http://127.0.0.1:9"  # nothing listens: a command that got as far as the network would exit 1
runner = CliRunner()

CASES = [
    (["bench", "--url", DOWN, "-n", "1", "--save", "{file}/a.json"], "--save"),
    (["bench", "--url", DOWN, "-n", "1", "--requests-out", "{dir}"], "--requests-out"),
    (["bench", "--url", DOWN, "-n", "1", "--html", "{file}/r.html"], "--html"),
    (["sim", "calibrate", "--url", DOWN, "--out", "{file}/p.yaml"], "--out"),
    (["simulate", "run", "--engines", "2", "-n", "20", "--save", "{file}/a.json"], "--save"),
    (["simulate", "compare", "prefix", "--engines", "2", "--requests", "20", "--save", "{file}"], "--save"),
    (["render", "-f", str(PROFILES / "qwen3-8b-aggregated.yaml"), "-d", "{file}"], "-d"),
    (["render", "-f", str(PROFILES / "qwen3-8b-aggregated.yaml"), "-d", "{file}/out"], "-d"),
    (
        ["deploy", "-f", str(PROFILES / "local-demo.yaml"), "--detach", "--run-dir", "{file}/runs"],
        "--run-dir",
    ),
    (["demo", "--quick", "--run-dir", "{file}"], "--run-dir"),
    (["demo", "--quick", "--report", "{file}/r.html"], "--report"),
]


@pytest.mark.parametrize(("args", "flag"), CASES, ids=[" ".join(a[:2]) + " " + f for a, f in CASES])
def test_an_unwritable_output_path_is_refused_before_the_work(
    args: list[str], flag: str, tmp_path: Path
) -> None:
    (tmp_path / "plain").write_text("")
    (tmp_path / "folder").mkdir()
    given = [a.format(file=tmp_path / "plain", dir=tmp_path / "folder") for a in args]
    result = runner.invoke(app, given, env={"COLUMNS": "200"})
    assert result.exit_code == 2, result.output
    assert result.stdout == "" and "Traceback" not in result.output
    value = given[given.index(flag) + 1]
    assert f"error: {flag} {value}: " in result.stderr, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder", "plain"]
    assert list((tmp_path / "folder").iterdir()) == []


def test_a_path_to_be_made_is_fine(tmp_path: Path) -> None:
    from infctl.cli.files import check_writable

    check_writable("--save", tmp_path / "new" / "deeper" / "a.json")
    check_writable("-d", tmp_path / "out", directory=True)
    check_writable("-d", tmp_path, directory=True)
    check_writable("--save", None)
    assert list(tmp_path.iterdir()) == []  # nothing made by the check
