"""Deploying a plan on this machine: pre-flight checks, and a detached supervisor of its own."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import warnings
from dataclasses import asdict
from pathlib import Path

from infctl.engines.cmdline import python_module
from infctl.errors import LocalTargetError
from infctl.local.admin_token import check_private, token_path
from infctl.local.control import delete
from infctl.local.launch import tail
from infctl.local.settings import SupervisorSettings
from infctl.local.spec import LocalPlan, ProcessSpec
from infctl.local.state import PLAN_FILE, RunState, is_live, read_state, write_json_atomic
from infctl.local.supervisor import OnChange

SUPERVISOR_LOG = "supervisor.log"


def prepare(plan: LocalPlan, settings: SupervisorSettings) -> Path:
    """Check the release can start (programs installed, a kept admin token still private), clear an
    earlier stopped or stale run, and write the plan file (which ``deploy --detach`` hands to its
    supervisor); return its path."""
    state = check_not_running(plan.run_dir, plan.release)
    if state is not None:
        delete(plan.run_dir, plan.release)
    for spec in plan.specs:
        check_installed(spec)
    if any(s.kind == "router" for s in plan.specs):
        check_private(token_path(plan))
    path = plan.release_dir / PLAN_FILE
    write_json_atomic(path, {"plan": plan.to_dict(), "settings": asdict(settings)})
    return path


def check_not_running(run_dir: Path, release: str) -> RunState | None:
    """The release's last state, unless it is running: then LocalTargetError, with the fix. Checked before
    ports are allocated, or a redeploy is told that its own router holds the port."""
    state = read_state(run_dir, release)
    if state is not None and is_live(state):
        raise LocalTargetError(
            f"local release {release!r} is already running (supervisor pid {state.supervisor_pid})",
            hint=f"stop it first: infctl delete --release {release} --run-dir {run_dir}",
        )
    return state


def read_plan(path: Path) -> tuple[LocalPlan, SupervisorSettings]:
    data = json.loads(path.read_text())
    return LocalPlan.from_dict(data["plan"]), SupervisorSettings(**data["settings"])


def check_installed(spec: ProcessSpec) -> None:
    """Fail before starting anything when a process's program (or the Python module it runs) is missing."""
    program = spec.argv[0]
    module = python_module(spec.argv)
    missing = None
    if shutil.which(program) is None:
        missing = f"program {program!r} not found"
    elif module is not None and _is_this_python(program):
        package = module.split(".")[0]
        if importlib.util.find_spec(package) is None:
            missing = f"Python module {package!r} is not installed"
    if missing is not None:
        raise LocalTargetError(
            f"cannot start {spec.name}: {missing}",
            hint=spec.install_hint or "install it, or set local.simulate: true to run simulated engines",
        )


def _is_this_python(program: str) -> bool:
    """Whether ``program`` is this very interpreter. Compared without resolving links: a virtualenv's
    python is a link to the base interpreter but imports from its own site-packages."""
    found = shutil.which(program)
    return found is not None and os.path.abspath(found) == os.path.abspath(sys.executable)


def start_detached(
    plan: LocalPlan,
    settings: SupervisorSettings,
    *,
    on_change: OnChange | None = None,
    poll_interval: float = 0.2,
) -> RunState:
    """Start a supervisor in a session of its own (``python -m infctl supervise``) and wait until every
    process is healthy; the supervisor keeps running after this returns. Call :func:`prepare` first."""
    plan_path = plan.release_dir / PLAN_FILE
    log_path = plan.release_dir / SUPERVISOR_LOG
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "infctl", "supervise", str(plan_path)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        return _wait_running(plan, proc, log_path, on_change, poll_interval, settings)
    finally:
        # The supervisor outlives this function on purpose; Popen would warn that it still runs.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            del proc


def _wait_running(
    plan: LocalPlan,
    proc: subprocess.Popen[bytes],
    log_path: Path,
    on_change: OnChange | None,
    poll_interval: float,
    settings: SupervisorSettings,
) -> RunState:
    deadline = time.monotonic() + settings.health_timeout * len(plan.stages()) + 30
    last: RunState | None = None
    while time.monotonic() < deadline:
        state = read_state(plan.run_dir, plan.release)
        if state is not None and state.supervisor_pid == proc.pid:
            if state != last and on_change is not None:
                on_change(state)
            last = state
            if state.status == "running":
                return state
            if state.status == "failed":
                raise LocalTargetError(state.error or "the supervisor failed", hint=state.hint)
        if proc.poll() is not None:
            raise LocalTargetError(
                f"the supervisor exited with code {proc.returncode}: {tail(log_path)}",
                hint=f"read {log_path}",
            )
        time.sleep(poll_interval)
    os.kill(proc.pid, signal.SIGTERM)
    raise LocalTargetError(
        f"local release {plan.release!r} was not healthy in time", hint=f"read the logs in {plan.release_dir}"
    )
