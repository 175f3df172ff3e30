"""``infctl sim``'s ports are bad input when they do not exist (exit 2, the flag named): ``--port 70000`` and
``--port 65535 --instances 2`` ended in a traceback from bind() (exit 1)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from infctl.cli import sim as sim_cli
from infctl.cli.main import app


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--port", "70000"], "'--port'"),
        (["--port", "-1"], "'--port'"),
        (["--kv-events-port", "65536"], "'--kv-events-port'"),
        (["--port", "65535", "--instances", "2"], "error: --port 65535: 2 consecutive ports run past 65535"),
        (["--port", "0", "--kv-events-port", "65534", "--instances", "2", "--data-parallel-size", "2"],
         "error: --kv-events-port 65534: 4 consecutive ports"),
    ],
)  # fmt: skip
def test_a_port_past_65535_is_bad_input(monkeypatch: pytest.MonkeyPatch, args: list[str], said: str) -> None:
    started: list[object] = []
    monkeypatch.setattr(sim_cli, "run", lambda cfg, on_ready=None: started.append(cfg))
    result = CliRunner().invoke(app, ["sim", *args], env={"COLUMNS": "200"})
    assert result.exit_code == 2 and not started, result.output
    assert said in result.stderr and result.stdout == "" and "Traceback" not in result.output


def test_the_last_port_may_be_65535(monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[object] = []
    monkeypatch.setattr(sim_cli, "run", lambda cfg, on_ready=None: started.append(cfg))
    result = CliRunner().invoke(app, ["sim", "--port", "65534", "--instances", "2"])
    assert result.exit_code == 0 and len(started) == 1, result.output
