"""Reading a profile or configuration file with its size and kind checked before a byte is read.

A profile is a few kilobytes. Pointing ``-f`` at ``/dev/zero``, a FIFO or a 50 MB file must fail at once with
a clear error, not read until the kernel kills the process: :func:`read_text` opens the file without blocking
(a FIFO with no writer would wait forever), checks on the open descriptor that it is a regular file no larger
than :data:`MAX_FILE_BYTES`, and never reads more than that even if the file grows meanwhile.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from infctl.errors import ConfigError

MAX_FILE_BYTES = 4 * 1024 * 1024
"""Largest profile or configuration file infctl reads, in bytes (4 MiB).

Shipped profiles are 1-5 KB and a router file listing thousands of backends stays under 1 MiB; anything
larger is a mistake (a log, a model file, a device) or an attack, and parsing it would cost seconds and
gigabytes before any error could be shown.
"""

_KINDS = (
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
)


def read_text(path: Path, shown: str) -> str:
    """The UTF-8 text of the regular file ``path`` (shown as ``shown`` in errors), at most MAX_FILE_BYTES."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise ConfigError(f"{shown}: file not found", hint=nearby_hint(path)) from None
    except OSError as err:
        raise ConfigError(f"{shown}: cannot read: {err.strerror or err}") from None
    try:
        info = os.fstat(fd)
        _check_kind(info, path, shown)
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as f:
        if info.st_size > MAX_FILE_BYTES:
            raise _too_large(shown, f"{info.st_size:,} bytes")
        try:
            data = f.read(MAX_FILE_BYTES + 1)
        except OSError as err:
            raise ConfigError(f"{shown}: cannot read: {err.strerror or err}") from None
    if len(data) > MAX_FILE_BYTES:
        raise _too_large(shown, "it grew while being read")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise ConfigError(
            f"{shown}:{line}: not UTF-8 text (byte {data[err.start]:#04x} at offset {err.start})",
            hint="save the file as UTF-8; profiles are YAML text",
        ) from None


def _check_kind(info: os.stat_result, path: Path, shown: str) -> None:
    if stat.S_ISREG(info.st_mode):
        return
    if stat.S_ISDIR(info.st_mode):
        raise ConfigError(f"{shown}: is a directory, expected a YAML file", hint=nearby_hint(path / "x"))
    kind = next((name for test, name in _KINDS if test(info.st_mode)), "not a regular file")
    raise ConfigError(
        f"{shown}: is {kind}, expected a regular YAML file",
        hint="give the path of a profile file; devices, pipes and sockets are not read",
    )


def _too_large(shown: str, size: str) -> ConfigError:
    return ConfigError(
        f"{shown}: too large to be a profile ({size}; the limit is {MAX_FILE_BYTES:,} bytes)",
        hint="check the path: profiles are a few kilobytes of YAML",
    )


def nearby_hint(path: Path, *, base: str = "the working directory") -> str:
    """What a mistyped path may have meant: the YAML files in its folder, or that the folder is missing
    (``base``: what the path was relative to)."""
    folder = path.parent
    if not folder.is_dir():
        return f"the folder {folder} does not exist either; the path is relative to {base}"
    found = sorted(p.name for p in folder.glob("*.y*ml"))[:8]
    return f"YAML files in {folder}: {', '.join(found)}" if found else f"{folder} holds no YAML files"
