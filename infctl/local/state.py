"""The release's state file: written by the supervisor, read by ``status`` and ``delete`` in other shells.

``<run_dir>/<release>/state.json`` is replaced atomically on every change, so a reader never sees half a file.
A state whose supervisor process is gone (killed, crashed, machine rebooted) while not marked stopped is
*stale*: its processes may linger and ``delete`` cleans them up.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Literal

from infctl.local.procs import pid_alive

ProcessStatus = Literal["pending", "starting", "healthy", "backoff", "failed", "stopping", "stopped"]
RunStatus = Literal["starting", "running", "failed", "stopping", "stopped"]

TERMINAL: frozenset[RunStatus] = frozenset({"stopped", "failed"})
"""Run statuses after which the supervisor has exited on purpose."""

STATE_FILE = "state.json"
PLAN_FILE = "plan.json"


@dataclass(frozen=True)
class ProcessState:
    """One supervised process as last seen by its supervisor."""

    name: str
    kind: str
    role: str | None
    group: str | None
    pool: str | None
    port: int
    url: str
    health_url: str
    log: str
    """Path of the log file that receives the process's stdout and stderr."""
    status: ProcessStatus = "pending"
    pid: int | None = None
    """Also the process-group id: each process leads its own group."""
    pid_started: int | None = None
    """The pid's start time (``procs.start_time``), so a later process reusing the pid is not taken for it."""
    restarts: int = 0
    """Restarts after crashes since the release started."""
    started_at: float | None = None
    """Unix time the current incarnation was started."""
    last_exit: int | None = None
    """Return code of the last exit (negative: killed by that signal)."""
    data_parallel_size: int = 1
    """Engines: data-parallel ranks behind ``url``, each a router backend of its own."""


@dataclass(frozen=True)
class RunState:
    """A local release: its supervisor and processes."""

    release: str
    supervisor_pid: int
    started_at: float
    status: RunStatus
    processes: tuple[ProcessState, ...]
    supervisor_started: int | None = None
    """The supervisor pid's start time (``procs.start_time``)."""
    grace_period: float = 10.0
    """The supervisor's SIGTERM-to-SIGKILL grace, so ``delete`` knows how long to wait for it."""
    error: str | None = None
    hint: str | None = None
    control_url: str | None = None
    """The supervisor's control endpoint (``GET /scale``, ``PUT /scale/{unit}``) when it scales at runtime."""

    def process(self, name: str) -> ProcessState:
        return next(p for p in self.processes if p.name == name)

    def with_process(self, updated: ProcessState) -> RunState:
        procs = tuple(updated if p.name == updated.name else p for p in self.processes)
        return replace(self, processes=procs)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunState:
        procs = tuple(ProcessState(**p) for p in data["processes"])
        return cls(**{**data, "processes": procs})


def release_dir(run_dir: Path, release: str) -> Path:
    return run_dir / release


def write_json_atomic(path: Path, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` so that readers see the old or the new file, never a mix."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=2)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_state(run_dir: Path, state: RunState) -> None:
    write_json_atomic(release_dir(run_dir, state.release) / STATE_FILE, state.to_dict())


def read_state(run_dir: Path, release: str) -> RunState | None:
    """The release's last state, or None when there is none (never deployed, or deleted)."""
    try:
        text = (release_dir(run_dir, release) / STATE_FILE).read_text()
    except FileNotFoundError:
        return None
    return RunState.from_dict(json.loads(text))


Alive = Callable[[int, int | None], bool]
"""``(pid, start time) -> runs``; ``procs.pid_alive`` unless a test injects another."""


def is_stale(state: RunState, *, alive: Alive = pid_alive) -> bool:
    """True when the supervisor died without marking the release stopped or failed."""
    return state.status not in TERMINAL and not alive(state.supervisor_pid, state.supervisor_started)


def is_live(state: RunState, *, alive: Alive = pid_alive) -> bool:
    """True when the release's supervisor still runs."""
    return state.status not in TERMINAL and alive(state.supervisor_pid, state.supervisor_started)


def list_releases(run_dir: Path) -> list[str]:
    """Names of the releases that have a state file under ``run_dir``."""
    if not run_dir.is_dir():
        return []
    return sorted(d.name for d in run_dir.iterdir() if (d / STATE_FILE).is_file())
