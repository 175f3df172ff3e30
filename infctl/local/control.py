"""``status`` and ``delete`` of a local release, usable from any shell (they read the state file)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
from dataclasses import asdict
from pathlib import Path
from typing import Any

import httpx

from infctl.errors import LocalTargetError
from infctl.local.http import probe, sync_client
from infctl.local.procs import group_alive, kill_group, pid_alive, wait_until
from infctl.local.spec import backend_ids
from infctl.local.state import (
    TERMINAL,
    Alive,
    ProcessState,
    RunState,
    is_live,
    read_state,
    release_dir,
)


def status(
    run_dir: Path,
    release: str,
    *,
    transport: httpx.BaseTransport | None = None,
    probe_timeout: float = 1.0,
    alive: Alive = pid_alive,
) -> dict[str, Any]:
    """The release's recorded state plus a live health probe of every process, as plain data.

    Each process's ``status`` and ``healthy`` are what is true now (:func:`observed`); the supervisor's
    last record of it is ``recorded_status``.
    """
    state = read_state(run_dir, release)
    if state is None:
        raise LocalTargetError(
            f"no local release {release!r} in {run_dir}",
            hint="deploy with `infctl deploy --target local -f PROFILE`; `infctl status` lists releases",
        )
    live = is_live(state)
    # A stopped release's ports may serve someone else by now; a stale one's leftovers may still answer.
    running = state.status not in TERMINAL
    with sync_client(timeout=probe_timeout, transport=transport) as client:
        processes = [
            {
                **_process_row(asdict(p)),
                **observed(
                    p,
                    running and probe(client, p.health_url),
                    p.pid is not None and alive(p.pid, p.pid_started),
                ),
            }
            for p in state.processes
        ]
    return {
        "release": state.release,
        "run_dir": str(run_dir),
        "status": state.status if live or state.status in TERMINAL else "stale",
        "supervisor_pid": state.supervisor_pid,
        "started_at": state.started_at,
        "error": state.error,
        "processes": processes,
    }


def observed(p: ProcessState, answering: bool, alive: bool) -> dict[str, Any]:
    """A process's status and health as they are now, from its recorded status and two live facts (pure).

    The supervisor records a status when it acts (``starting`` at launch, ``healthy`` at its first 200, up to
    a probe interval plus timeout later) and never re-probes a healthy process, so the record can lag in
    both directions. ``answering``: its health URL gave 200 just now; ``alive``: the recorded pid still runs
    (same start time). An answer while the recorded process is gone comes from another program on the port.
    """
    healthy = answering and alive
    status: str = p.status
    if p.status in ("starting", "healthy") and p.pid is not None:
        status = "healthy" if healthy else "exited" if not alive else p.status
        if p.status == "healthy" and alive and not answering:
            status = "unresponsive"
    return {"status": status, "healthy": healthy, "recorded_status": p.status}


def _process_row(p: dict[str, Any]) -> dict[str, Any]:
    """A process as ``status`` shows it; an engine with its router backends (one per data-parallel rank)."""
    keys = ("name", "kind", "role", "group", "pool", "url", "pid", "status", "restarts", "last_exit", "log")
    row = {k: p[k] for k in keys}
    ranks = p.get("data_parallel_size", 1)
    row["data_parallel_size"] = ranks
    row["backends"] = list(backend_ids(p["url"], ranks)) if p["kind"] == "engine" else []
    return row


def delete(run_dir: Path, release: str, *, keep_logs: bool = False) -> dict[str, Any]:
    """Stop the release and remove its directory: state, plan, admin token and logs (``keep_logs``: all but
    the logs). Idempotent: no release means nothing to do."""
    state = read_state(run_dir, release)
    if state is None:
        message = f"nothing to delete: no local release {release!r} in {run_dir}"
        return {"release": release, "deleted": False, "message": message}
    if is_live(state):
        _stop_supervisor(state)
    leftovers = [p.name for p in state.processes if _kill_leftover(p, state.grace_period)]
    directory = release_dir(run_dir, release)
    logs = directory / "logs"  # LocalPlan.log_path
    for entry in [*directory.iterdir()] if directory.is_dir() else []:
        if keep_logs and entry == logs:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
    if not keep_logs:
        with contextlib.suppress(OSError):
            directory.rmdir()
    kept = f"; logs kept in {logs}" if keep_logs else ""
    return {
        "release": release,
        "deleted": True,
        "killed_leftovers": leftovers,
        "logs": str(logs) if keep_logs else None,
        "message": f"deleted local release {release!r}{kept}",
    }


def _stop_supervisor(state: RunState) -> None:
    pid = state.supervisor_pid
    _signal(pid, signal.SIGTERM)  # is_live checked that the pid is still the supervisor
    # The supervisor itself gives each process the grace period, router first then engines.
    if not wait_until(lambda: not pid_alive(pid), 2 * state.grace_period + 5):
        _signal(pid, signal.SIGKILL)
        wait_until(lambda: not pid_alive(pid), 5.0)


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _kill_leftover(process: ProcessState, grace: float) -> bool:
    pgid = process.pid
    if pgid is None or not group_alive(pgid):
        return False
    # A group outliving its leader keeps the leader's pid reserved; a live leader must be the one recorded.
    if pid_alive(pgid) and not pid_alive(pgid, process.pid_started):
        return False
    return kill_group(pgid, grace)
