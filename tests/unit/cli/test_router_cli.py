"""``infctl router``'s front: router.yaml's ``server:``, with ``--server`` winning; taught by --help."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from infctl.cli import router as router_cli
from infctl.cli.main import _register, app


@pytest.fixture(scope="module")
def runner() -> CliRunner:
    if not any(c.name == "router" for c in app.registered_commands):
        _register()
    return CliRunner()


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """What the command hands the daemon's one entry point (which would listen, so it is recorded)."""
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(router_cli, "run", lambda cfg, **kw: calls.append({"cfg": cfg, **kw}))
    return calls


@pytest.mark.parametrize(
    ("file_line", "flags", "front"),
    [
        ("", [], "lean"),
        ("server: aiohttp\n", [], "aiohttp"),
        ("server: aiohttp\n", ["--server", "lean"], "lean"),
        ("", ["--server", "aiohttp"], "aiohttp"),
    ],
)
def test_the_front_comes_from_the_file_and_the_flag_wins(
    runner: CliRunner,
    started: list[dict[str, Any]],
    tmp_path: Path,
    file_line: str,
    flags: list[str],
    front: str,
) -> None:
    path = tmp_path / "router.yaml"
    path.write_text('backends: [{url: "http://127.0.0.1:9"}]\n' + file_line)
    result = runner.invoke(app, ["router", "-f", str(path), *flags])
    assert result.exit_code == 0, result.output
    (call,) = started
    assert call["server"] == front and call["cfg"].server == front


def test_an_unknown_front_is_refused_naming_the_key(runner: CliRunner, started: list[dict[str, Any]]) -> None:
    result = runner.invoke(app, ["router", "--backend", "http://127.0.0.1:9", "--server", "nginx"])
    assert result.exit_code == 2 and "server" in result.output and not started


def test_help_names_the_file_key(runner: CliRunner) -> None:
    result = runner.invoke(app, ["router", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0 and "--server" in result.output and "file's server" in result.output


def test_no_token_on_a_public_address_is_refused_with_the_fix_unless_insecure_admin(
    runner: CliRunner, started: list[dict[str, Any]], tmp_path: Path
) -> None:
    env = {"INFCTL_ROUTER_ADMIN_TOKEN": None}
    args = ["router", "--backend", "http://127.0.0.1:9", "--host", "0.0.0.0"]
    refused = runner.invoke(app, args, env=env)
    assert refused.exit_code == 2 and not started  # a ConfigError: the usage was wrong
    assert "refusing to start" in refused.output and "--insecure-admin" in refused.output
    assert "Traceback" not in refused.output
    assert runner.invoke(app, [*args, "--insecure-admin"], env=env).exit_code == 0
    path = tmp_path / "router.yaml"
    path.write_text('backends: [{url: "http://127.0.0.1:9"}]\nhost: 0.0.0.0\ninsecure_admin: true\n')
    assert runner.invoke(app, ["router", "-f", str(path)], env=env).exit_code == 0
    with_token = runner.invoke(app, args, env={"INFCTL_ROUTER_ADMIN_TOKEN": "s3cret"})
    assert with_token.exit_code == 0
    assert [c["cfg"].insecure_admin for c in started] == [True, True, False]
