"""Starting and stopping one process group (async I/O, no decisions)."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import shlex
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

from infctl.errors import LocalTargetError
from infctl.local.procs import group_alive, signal_group
from infctl.local.spec import ProcessSpec

_PR_SET_PDEATHSIG = 1


def _parent_death_signal() -> Callable[[], None] | None:
    """A pre-exec hook asking Linux to SIGTERM the child if the supervisor dies without stopping it."""
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def hook() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)

    return hook


_PRE_EXEC = _parent_death_signal()


async def spawn(spec: ProcessSpec, log_path: Path) -> asyncio.subprocess.Process:
    """Start ``spec`` as the leader of a new session (so of its own process group), output to ``log_path``."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **spec.env}
    with log_path.open("ab") as log:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        log.write(f"--- infctl {stamp}: starting {shlex.join(spec.argv)}\n".encode())
        log.flush()
        try:
            return await asyncio.create_subprocess_exec(
                *spec.argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=asyncio.subprocess.STDOUT,
                env=env,
                start_new_session=True,
                preexec_fn=_PRE_EXEC,
            )
        except OSError as err:
            raise LocalTargetError(
                f"cannot start {spec.name}: {spec.argv[0]}: {err.strerror or err}",
                hint="install the program, or set local.simulate: true to run the simulated engine instead",
            ) from err


async def terminate(proc: asyncio.subprocess.Process, grace: float) -> int:
    """SIGTERM the process's group, SIGKILL what is left after ``grace`` seconds; return the exit code."""
    loop = asyncio.get_running_loop()
    pgid = proc.pid
    if signal_group(pgid, signal.SIGTERM):
        deadline = loop.time() + grace
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), grace)
        # The leader may be gone while its children (an engine's workers) still shut down;
        # Nothing signals a group's end, so poll it.
        while group_alive(pgid) and loop.time() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        signal_group(pgid, signal.SIGKILL)
    return await proc.wait()


def tail(path: Path, lines: int = 5) -> str:
    """The last lines of a log file, for error messages ('' when unreadable)."""
    try:
        text = path.read_bytes()[-8192:].decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(line for line in text.splitlines()[-lines:] if line.strip())
