"""Process-group signalling shared by the supervisor and ``delete`` (thin OS calls)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, exited but not yet reaped, counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    # The state letter follows the parenthesised command name, which may itself contain spaces.
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def group_alive(pgid: int) -> bool:
    """Whether any process of the group ``pgid`` remains."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def signal_group(pgid: int, sig: signal.Signals) -> bool:
    """Send ``sig`` to every process of the group; False when the group is gone."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    return True


def wait_until(
    done: Callable[[], bool],
    timeout: float,
    *,
    interval: float = 0.05,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> bool:
    """Poll ``done`` until it is true or ``timeout`` seconds pass; return its last value."""
    deadline = clock() + timeout
    while not done():
        if clock() >= deadline:
            return False
        sleep(interval)
    return True


def kill_group(pgid: int, grace: float) -> bool:
    """SIGTERM the group, SIGKILL it after ``grace`` seconds; True when there was something to stop."""
    if not signal_group(pgid, signal.SIGTERM):
        return False
    if not wait_until(lambda: not group_alive(pgid), grace):
        signal_group(pgid, signal.SIGKILL)
        wait_until(lambda: not group_alive(pgid), 5.0)
    return True
