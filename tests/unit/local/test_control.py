import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from infctl.errors import LocalTargetError
from infctl.local import delete, status
from infctl.local.procs import group_alive
from infctl.local.state import ProcessState, RunState, read_state, write_state

DEAD_PID = 2**22 + 999


def proc(name: str, port: int, pid: int | None = None) -> ProcessState:
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
        assert (tmp_path / "r" / "logs").is_dir()
        assert delete(tmp_path, "r")["deleted"] is False
    finally:
        leftover.kill()
        leftover.wait()
