"""``infctl sim --kv-events-encoding``: both encodings in --help; anything else refused up front."""

from __future__ import annotations

from typer.testing import CliRunner

from infctl.cli.main import _register, app


def _runner() -> CliRunner:
    if not any(g.name == "sim" for g in app.registered_groups):
        _register()
    return CliRunner()


def test_an_unknown_encoding_is_a_config_error_with_its_fix() -> None:
    result = _runner().invoke(app, ["sim", "--kv-events-port", "0", "--kv-events-encoding", "json"])
    assert result.exit_code == 2  # a ConfigError, as for the other choice flags of `infctl sim`
    assert "--kv-events-encoding 'json' is not one of map, array" in result.output
    assert "use --kv-events-encoding map" in result.output


def test_help_teaches_both_encodings() -> None:
    result = _runner().invoke(app, ["sim", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "--kv-events-encoding" in result.output and "vllm-router" in result.output
