import json
import os
from dataclasses import replace
from pathlib import Path

from infctl.local.procs import pid_alive, start_time
from infctl.local.state import (
    ProcessState,
    RunState,
    is_live,
    is_stale,
    list_releases,
    read_state,
    write_json_atomic,
    write_state,
)


def _state(status: str = "running", pid: int = 4242) -> RunState:
    proc = ProcessState(
        name="engine-agg-0",
        kind="engine",
        role="both",
        group=None,
        pool="agg",
        port=18000,
        url="http://127.0.0.1:18000",
        health_url="http://127.0.0.1:18000/health",
        log="/tmp/x.log",
        status="healthy",
        pid=1234,
        restarts=2,
        started_at=1.5,
        last_exit=-9,
    )
    return RunState(release="demo", supervisor_pid=pid, started_at=1.0, status=status, processes=(proc,))  # type: ignore[arg-type]


def test_state_round_trips_through_the_file(tmp_path: Path) -> None:
    write_state(tmp_path, _state())
    assert read_state(tmp_path, "demo") == _state()
    assert list_releases(tmp_path) == ["demo"]


def test_missing_state_reads_as_none(tmp_path: Path) -> None:
    assert read_state(tmp_path, "nope") is None
    assert list_releases(tmp_path / "absent") == []


def test_atomic_write_leaves_no_temporary_files(tmp_path: Path) -> None:
    path = tmp_path / "a" / "state.json"
    write_json_atomic(path, {"x": 1})
    write_json_atomic(path, {"x": 2})
    assert json.loads(path.read_text()) == {"x": 2}
    assert os.listdir(path.parent) == ["state.json"]


def test_a_state_whose_supervisor_is_gone_is_stale() -> None:
    state = _state()
    assert is_stale(state, alive=lambda pid, started: False)
    assert not is_live(state, alive=lambda pid, started: False)
    assert is_live(state, alive=lambda pid, started: pid == 4242)
    assert not is_stale(state, alive=lambda pid, started: True)


def test_a_stopped_or_failed_release_is_neither_stale_nor_live() -> None:
    for status in ("stopped", "failed"):
        state = _state(status)
        assert not is_stale(state, alive=lambda pid, started: False)
        assert not is_live(state, alive=lambda pid, started: True)


def test_the_current_process_is_alive_and_a_dead_pid_is_not() -> None:
    assert pid_alive(os.getpid())
    assert not pid_alive(2**22 + 12345)


def test_with_process_replaces_one_process() -> None:
    state = _state()
    updated = state.with_process(replace(state.processes[0], restarts=3))
    assert updated.process("engine-agg-0").restarts == 3
    assert state.process("engine-agg-0").restarts == 2


def test_a_reused_pid_is_not_taken_for_the_recorded_process() -> None:
    started = start_time(os.getpid())
    assert started is not None
    assert pid_alive(os.getpid(), started)
    assert not pid_alive(os.getpid(), started + 1)
    state = replace(_state(pid=os.getpid()), supervisor_started=started + 1)
    assert is_stale(state)
