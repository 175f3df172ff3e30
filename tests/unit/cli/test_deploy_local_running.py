"""``infctl deploy`` of a local release that already runs: said so, not blamed on the port it holds."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from typer.testing import CliRunner

from infctl.cli.main import app
from infctl.local.procs import start_time
from infctl.local.state import RunState, write_state

PROFILES = Path(__file__).resolve().parents[3] / "profiles"


def test_redeploying_a_running_release_says_it_runs_not_that_its_port_is_taken(tmp_path: Path) -> None:
    """The plan's port check came first, so a second deploy read "router.port N is taken"."""
    me = os.getpid()  # a live "supervisor": this test process
    write_state(
        tmp_path,
        RunState(
            release="local-demo",
            supervisor_pid=me,
            started_at=0.0,
            status="running",
            processes=(),
            supervisor_started=start_time(me),
        ),
    )
    with socket.socket() as held:  # the running release's router
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        args = ["deploy", "-f", str(PROFILES / "local-demo.yaml"), "--detach", "--run-dir", str(tmp_path)]
        result = CliRunner().invoke(app, [*args, "--set", f"router.port={port}"])
    assert result.exit_code == 1, result.output
    assert "local release 'local-demo' is already running" in result.output
    assert "is taken" not in result.output and "infctl delete" in result.output
