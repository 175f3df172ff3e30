"""Process-group signalling shared by the supervisor and ``delete`` (thin OS calls)."""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path

_PROC = Path("/proc")


def _stat(entry: Path) -> tuple[str, int, int] | None:
    """(state letter, process group, start time) from ``/proc/<pid>/stat``, or None when unreadable."""
    try:
        text = (entry / "stat").read_text()
    except OSError:
        return None
    # The fields after the parenthesised command name (which may contain spaces): state, ppid, pgrp, ...;
    # starttime (clock ticks after boot) is the 22nd field of the line, the 20th of these.
    fields = text.rsplit(")", 1)[-1].split()
    return fields[0], int(fields[2]), int(fields[19])


def start_time(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks after boot (Linux); None when unknown.

    Recorded beside a pid, it tells the process apart from a later one that got the same pid (after a
    reboot, say), so ``delete`` never signals a stranger.
    """
    stat = _stat(_PROC / str(pid))
    return None if stat is None else stat[2]


def pid_alive(pid: int, started: int | None = None) -> bool:
    """Whether ``pid`` runs and, when ``started`` is given, is the process that started then.

    A zombie (exited, not yet reaped) counts as gone.
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return started is None
    stat = _stat(_PROC / str(pid))
    if stat is None:
        return True
    return stat[0] != "Z" and (started is None or stat[2] == started)


def group_alive(pgid: int) -> bool:
    """Whether a process of the group ``pgid`` still runs (zombies, e.g. left to an init that does not
    reap, do not count)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if not _PROC.is_dir():
        return True
    stats = (_stat(entry) for entry in _PROC.iterdir() if entry.name.isdigit())
    return any(stat is not None and stat[1] == pgid and stat[0] != "Z" for stat in stats)


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


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a server could bind ``host:port`` now (the planner's ``is_free`` probe)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # As the servers themselves do: a port whose old connections linger in TIME_WAIT is free.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


_LISTEN = "0A"
"""A listening socket's state in ``/proc/net/tcp``."""


def listens_on(pid: int, port: int) -> bool:
    """Whether process ``pid`` holds a TCP socket listening on ``port`` (Linux ``/proc``; False when
    unreadable). With SO_REUSEPORT several processes listen on one port, so a health probe cannot tell
    which answered: this can (the supervisor's router hand-over waits for it)."""
    inodes: set[str] = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = (_PROC / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == _LISTEN and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    if not inodes:
        return False
    try:
        fds = list((_PROC / str(pid) / "fd").iterdir())
    except OSError:
        return False
    for fd in fds:
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:[") and target[8:-1] in inodes:
            return True
    return False
