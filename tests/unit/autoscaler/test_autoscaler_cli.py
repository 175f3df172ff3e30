"""``infctl autoscaler`` through the real root app: a mistake is one red line with a fix, and an exit code."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from infctl.cli.main import _register, app

PROFILES = Path(__file__).parents[3] / "profiles"


@pytest.fixture(scope="module")
def cli() -> CliRunner:
    if not any(c.name == "autoscaler" for c in app.registered_commands):
        _register()
    return CliRunner()


def test_without_a_file_it_says_what_to_pass(cli: CliRunner) -> None:
    result = cli.invoke(app, ["autoscaler"])
    assert result.exit_code == 2
    assert "no deployment given" in result.output and "-f PROFILE" in result.output


def test_a_local_release_that_is_not_running(cli: CliRunner, tmp_path: Path) -> None:
    profile = PROFILES / "local-demo.yaml"
    result = cli.invoke(app, ["autoscaler", "-f", str(profile), "--run-dir", str(tmp_path)])
    assert result.exit_code == 1
    assert "'local-demo'" in result.output and "not running with runtime scaling" in result.output


def test_a_kubernetes_profile_asks_for_the_rendered_file(cli: CliRunner) -> None:
    result = cli.invoke(app, ["autoscaler", "-f", str(PROFILES / "qwen3-8b-aggregated.yaml")])
    assert result.exit_code == 2 and "rendered autoscaler.yaml" in result.output


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--schedule", "22:00 min=2"], "expected 'HH:MM-HH:MM min=N"),
        (["--ratio", "a:b"], "expected LOW:HIGH"),
        (["--time-scale", "0"], "--time-scale must be > 0"),
    ],
)
def test_bad_flags(cli: CliRunner, tmp_path: Path, flags: list[str], message: str) -> None:
    result = cli.invoke(app, ["autoscaler", "-f", str(PROFILES / "local-demo.yaml"), *flags])
    assert result.exit_code == 2 and message in result.output
