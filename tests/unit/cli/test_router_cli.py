"""``infctl router``'s front: router.yaml's ``server:``, with ``--server`` winning; taught by --help."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from infctl.cli import router as router_cli
from infctl.cli.flags import field_help
from infctl.cli.main import _register, app
from infctl.config.router import HealthPolicy, RouterOptions


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


def test_with_no_file_the_daemon_runs_on_the_settings_models_defaults(
    runner: CliRunner, started: list[dict[str, Any]]
) -> None:
    result = runner.invoke(app, ["router", "--backend", "http://127.0.0.1:9"])
    assert result.exit_code == 0, result.output
    (call,) = started
    assert {k: getattr(call["cfg"], k) for k in RouterOptions.model_fields} == dict(RouterOptions())
    assert call["server"] == RouterOptions().server


def test_each_settings_flag_is_helped_by_its_fields_doc() -> None:
    """--help says what the settings model says (meaning and default), not a copy written by hand."""
    holder = typer.Typer()
    router_cli.register(holder)
    helps = {p.opts[-1]: getattr(p, "help", None) for p in typer.main.get_command(holder).params}
    for flag, name in [
        ("--host", "host"),
        ("--port", "port"),
        ("--policy", "policy"),
        ("--scrape-interval", "scrape_interval_s"),
        ("--admission-queue", "admission_queue"),
        ("--max-body-bytes", "max_body_bytes"),
        ("--server", "server"),
        ("--trust-request-chat-template", "trust_request_chat_template"),
    ]:
        assert helps[flag] == field_help(RouterOptions, name), flag
    assert helps["--failures-to-eject"] == field_help(
        HealthPolicy, "failures_to_eject", key="health.failures_to_eject"
    )
    assert "Default 1024." in helps["--admission-queue"] and "'lean'" in helps["--server"]


@pytest.mark.parametrize("url", ["127.0.0.1:9", "localhost:8000", "http://", "ftp://e:1", "http://e:99999"])
def test_a_backend_that_is_not_an_http_url_is_refused_before_the_router_starts(
    runner: CliRunner, started: list[dict[str, Any]], tmp_path: Path, url: str
) -> None:
    """A bare host:port used to start a router that probed it, failed and kept it ejected."""
    by_flag = runner.invoke(app, ["router", "--backend", url])
    assert by_flag.exit_code == 2 and not started, by_flag.output
    assert "error: --backend" in by_flag.output and repr(url) in by_flag.output  # the flag, as every URL flag
    assert "Value error" not in by_flag.output and "Traceback" not in by_flag.output
    path = tmp_path / "router.yaml"
    path.write_text(f"backends:\n  - url: {url!r}\n")
    by_file = runner.invoke(app, ["router", "-f", str(path)])
    assert by_file.exit_code == 2 and not started
    assert "router.yaml:2: backends[0].url" in by_file.output


def test_the_start_up_line_waits_until_the_router_listens(
    runner: CliRunner, started: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    result = runner.invoke(app, ["router", "--backend", "http://127.0.0.1:9", "--port", "0"])
    assert result.exit_code == 0, result.output
    assert "infctl router on" not in result.output  # the daemon (recorded here) never listened
    (call,) = started
    call["on_listening"]("http://127.0.0.1:40123")  # what the daemon says once its port is bound
    said = capsys.readouterr().err
    assert "infctl router on http://127.0.0.1:40123 -> 1 backends, policy" in said


@pytest.mark.parametrize("pair", ["colour=red", "role"])
def test_a_backend_pair_it_cannot_read_is_refused_naming_the_flag_and_the_keys(
    runner: CliRunner, started: list[dict[str, Any]], pair: str
) -> None:
    spec = f"http://127.0.0.1:9,role=decode,{pair}"
    result = runner.invoke(app, ["router", "--backend", spec])
    assert result.exit_code == 2 and not started, result.output
    assert f"--backend {spec}: cannot read {pair!r}" in result.output
    assert (
        "with keys role, group, pool, upstream, engine, dp_rank, dp_size, weight, id, kv_events"
        in result.output
    )


def test_a_backend_flag_may_name_its_engines_rank_count(
    runner: CliRunner, started: list[dict[str, Any]]
) -> None:
    spec = "http://127.0.0.1:9,role=prefill,engine=sglang,dp_rank=16,dp_size=17"
    result = runner.invoke(app, ["router", "--backend", spec])
    assert result.exit_code == 0, result.output
    (b,) = started[0]["cfg"].backends
    assert (b.dp_rank, b.dp_size) == (16, 17)


@pytest.mark.parametrize(
    ("file_line", "flags", "trusted"),
    [
        ("", [], False),
        ("trust_request_chat_template: true\n", [], True),
        ("", ["--trust-request-chat-template"], True),
    ],
)
def test_trusting_request_templates_comes_from_the_file_or_the_flag(
    runner: CliRunner,
    started: list[dict[str, Any]],
    tmp_path: Path,
    file_line: str,
    flags: list[str],
    trusted: bool,
) -> None:
    path = tmp_path / "router.yaml"
    path.write_text('backends: [{url: "http://127.0.0.1:9"}]\n' + file_line)
    result = runner.invoke(app, ["router", "-f", str(path), *flags])
    assert result.exit_code == 0, result.output
    (call,) = started
    assert call["cfg"].trust_request_chat_template is trusted
