"""Where local releases keep their state: a per-user directory, the same from any working directory.

``<run_dir>/<release>/`` holds a release's plan, state, logs and admin token. ``run_dir`` is, first found:
``--run-dir``, the profile's ``local.run_dir``, ``$INFCTL_RUN_DIR``, else ``$XDG_STATE_HOME/infctl/releases``
(``~/.local/state/infctl/releases`` when ``XDG_STATE_HOME`` is unset or relative, as the XDG base directory
specification says). So ``infctl status NAME`` finds a release deployed from another directory.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from infctl.errors import ConfigError

RUN_DIR_ENV = "INFCTL_RUN_DIR"


def state_home(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_STATE_HOME`` when set and absolute, else ``~/.local/state``."""
    env = os.environ if env is None else env
    given = env.get("XDG_STATE_HOME", "")
    if given and Path(given).is_absolute():
        return Path(given)
    home = env.get("HOME") or str(Path.home())
    return Path(home) / ".local" / "state"


def default_run_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$INFCTL_RUN_DIR`` (absolute), else the per-user state directory's ``infctl/releases``."""
    env = os.environ if env is None else env
    given = env.get(RUN_DIR_ENV, "")
    if given:
        return Path(given).absolute()
    return state_home(env) / "infctl" / "releases"


def resolve_run_dir(override: Path | None = None, configured: Path | None = None) -> Path:
    """The run directory: ``override`` (``--run-dir``), else ``configured`` (``local.run_dir``), else the
    default; absolute. ConfigError (exit 2) when it, or the nearest existing parent, is a file: every
    command reading or writing releases (status, delete, deploy, demo, doctor, the autoscaler) ended in a
    NotADirectoryError traceback or read it as "no local releases". One not created yet is fine."""
    chosen = override if override is not None else configured
    resolved = (chosen if chosen is not None else default_run_dir()).absolute()
    nearest = next(p for p in (resolved, *resolved.parents) if p.exists())
    if nearest.is_dir():
        return resolved
    what = f"{nearest} is a file, not a directory" if nearest != resolved else "a file, not a directory"
    if override is not None:
        raise ConfigError(f"--run-dir {override}: {what}", hint="name a directory: --run-dir DIR")
    hint = "pass --run-dir DIR, or change local.run_dir or $INFCTL_RUN_DIR"
    raise ConfigError(f"run directory {resolved}: {what}", hint=hint)
