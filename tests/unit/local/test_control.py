import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from infctl.errors import LocalTargetError
from infctl.local import delete, status
from infctl.local.control import observed
from infctl.local.procs import group_alive
from infctl.local.state import ProcessState, RunState, read_state, write_state

DEAD_PID = 2**22 + 999


def proc(name: str, port: int, pid: int | None = os.getpid()) -> ProcessState:
    """A recorded process; by default this test's own live pid stands in for it."""
    url = f"http://127.0.0.1:{port}"
    return ProcessState(
        name=name,
        kind="engine",
        role="both",
        group=None,
        pool=None,
        port=port,
        url=url,
        health_url=url + "/health",
        log=f"/tmp/{name}.log",
        status="healthy",
        pid=pid,
    )


def state(supervisor_pid: int, *procs: ProcessState) -> RunState:
    return RunState(
        release="r", supervisor_pid=supervisor_pid, started_at=0.0, status="running", processes=procs
    )


def health(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200 if request.url.port == 18000 else 503)


def test_status_probes_every_process(tmp_path: Path) -> None:
    write_state(tmp_path, state(os.getpid(), proc("engine-0", 18000), proc("engine-1", 18001)))
    report = status(tmp_path, "r", transport=httpx.MockTransport(health))
    assert report["status"] == "running"
    healthy = [(p["name"], p["healthy"]) for p in report["processes"]]
    assert healthy == [("engine-0", True), ("engine-1", False)]


def test_status_lists_each_engines_router_backends_one_per_data_parallel_rank(tmp_path: Path) -> None:
    ranked = replace(proc("engine-0", 18000), data_parallel_size=2)
    write_state(tmp_path, state(os.getpid(), ranked, proc("engine-1", 18001)))
    rows = status(tmp_path, "r", transport=httpx.MockTransport(health))["processes"]
    assert [(p["data_parallel_size"], p["backends"]) for p in rows] == [
        (2, ["http://127.0.0.1:18000#dp0", "http://127.0.0.1:18000#dp1"]),
        (1, ["http://127.0.0.1:18001"]),
    ]


def test_status_of_a_release_whose_supervisor_died_is_stale(tmp_path: Path) -> None:
    write_state(tmp_path, state(DEAD_PID, proc("engine-0", 18000), proc("engine-1", 18001)))
    report = status(tmp_path, "r", transport=httpx.MockTransport(health))
    assert report["status"] == "stale"
    # Leftovers of a dead supervisor may still serve: the probe tells.
    assert [p["healthy"] for p in report["processes"]] == [True, False]


def test_a_stopped_release_is_not_probed(tmp_path: Path) -> None:
    write_state(tmp_path, replace(state(DEAD_PID, proc("engine-0", 18000)), status="stopped"))
    report = status(tmp_path, "r", transport=httpx.MockTransport(health))
    assert report["status"] == "stopped"
    assert report["processes"][0]["healthy"] is False


def test_status_of_an_unknown_release_says_how_to_deploy(tmp_path: Path) -> None:
    with pytest.raises(LocalTargetError, match="no local release 'nope'") as err:
        status(tmp_path, "nope")
    assert err.value.hint is not None and "infctl deploy" in err.value.hint


def test_delete_without_a_release_is_a_no_op(tmp_path: Path) -> None:
    result = delete(tmp_path, "r")
    assert result["deleted"] is False
    assert "nothing to delete" in result["message"]


def test_delete_of_a_stale_release_kills_leftover_process_groups(tmp_path: Path) -> None:
    leftover = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        st = replace(state(DEAD_PID, proc("engine-0", 18000, pid=leftover.pid)), grace_period=2.0)
        write_state(tmp_path, st)
        (tmp_path / "r" / "logs").mkdir()
        result = delete(tmp_path, "r")
        leftover.wait(timeout=5)
        assert result["deleted"] is True
        assert result["killed_leftovers"] == ["engine-0"]
        assert not group_alive(leftover.pid)
        assert read_state(tmp_path, "r") is None
        assert not (tmp_path / "r").exists()  # nothing left behind: state, plan, token and logs go
        assert delete(tmp_path, "r")["deleted"] is False
    finally:
        leftover.kill()
        leftover.wait()


def test_delete_removes_the_admin_token_and_keeps_logs_only_when_asked(tmp_path: Path) -> None:
    for keep in (False, True):
        write_state(tmp_path, state(DEAD_PID))
        (tmp_path / "r" / "logs").mkdir(exist_ok=True)
        (tmp_path / "r" / "logs" / "router.log").write_text("served\n")
        (tmp_path / "r" / "admin-token").write_text("secret\n")
        result = delete(tmp_path, "r", keep_logs=keep)
        assert result["deleted"] is True and not (tmp_path / "r" / "admin-token").exists()
        assert (tmp_path / "r" / "logs" / "router.log").is_file() is keep
        assert (tmp_path / "r").exists() is keep


class _Health(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def answering_port() -> Iterator[int]:
    """A real /health on 127.0.0.1 answering 200, as a started router does before its supervisor looks."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def router(port: int, status: str, pid: int | None = os.getpid()) -> ProcessState:
    return replace(proc("router", port, pid), kind="router", role=None, status=status)  # type: ignore[arg-type]


def test_a_router_answering_before_its_supervisor_looked_is_healthy_not_starting(
    tmp_path: Path, answering_port: int
) -> None:
    # The supervisor marks "healthy" only at its next probe (0.2 s later, or 2 s when a probe times out):
    # meanwhile the row said "starting" beside healthy=True (issue 18).
    write_state(tmp_path, state(os.getpid(), router(answering_port, "starting")))
    row = status(tmp_path, "r")["processes"][0]
    assert (row["status"], row["healthy"], row["recorded_status"]) == ("healthy", True, "starting")
    assert row["role"] is None


def test_an_answer_on_the_port_of_a_process_that_is_gone_is_not_health(
    tmp_path: Path, answering_port: int
) -> None:
    write_state(
        tmp_path,
        state(
            os.getpid(),
            router(answering_port, "healthy", pid=DEAD_PID),
            replace(router(answering_port, "backoff", pid=None), name="autoscaler"),
        ),
    )
    rows = status(tmp_path, "r")["processes"]
    assert [(p["status"], p["healthy"]) for p in rows] == [("exited", False), ("backoff", False)]


@pytest.mark.parametrize(
    ("recorded", "answering", "alive", "shown"),
    [
        ("starting", True, True, ("healthy", True)),
        ("starting", False, True, ("starting", False)),
        ("starting", False, False, ("exited", False)),
        ("healthy", True, True, ("healthy", True)),
        ("healthy", False, True, ("unresponsive", False)),  # hung: the supervisor never re-probes
        ("healthy", True, False, ("exited", False)),
        ("stopping", True, True, ("stopping", True)),
        ("backoff", False, False, ("backoff", False)),
    ],
)
def test_observed_status(recorded: str, answering: bool, alive: bool, shown: tuple[str, bool]) -> None:
    p = replace(proc("engine-0", 18000), status=recorded)  # type: ignore[arg-type]
    result = observed(p, answering, alive)
    assert (result["status"], result["healthy"]) == shown and result["recorded_status"] == recorded
