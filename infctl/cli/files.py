"""``-f``, as kubectl takes it: repeatable, a file, a directory (its YAML and JSON files) or a glob.

``infctl validate -f a.yaml -f b.yaml`` checks both; ``-f profiles/`` and ``-f 'profiles/*.yaml'`` every
profile there. A glob that matches nothing or a directory without profiles is an error naming it (never a
silent pass); a missing file is reported by the loader, as every unreadable file.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Annotated, TypeVar

import typer

from infctl.errors import ConfigError, InfctlError

T = TypeVar("T")

PROFILE_SUFFIXES = (".yaml", ".yml", ".json")

FilesOption = Annotated[
    list[str] | None,
    typer.Option(
        "-f",
        "--file",
        metavar="PATH",
        help="Profile file, directory (its *.yaml, *.yml, *.json) or glob; repeatable.",
        show_default=False,
    ),
]


def expand_files(specs: Iterable[str | Path]) -> list[Path]:
    """Every file ``specs`` name, in the order given (a directory's and a glob's sorted), each once."""
    found: list[Path] = []
    for spec in specs:
        text = str(spec)
        if glob.has_magic(text):
            matches = [Path(m) for m in sorted(glob.glob(text)) if Path(m).is_file()]
            if not matches:
                raise ConfigError(f"-f {text}: no file matches", hint="check the pattern, or quote it")
        elif Path(text).is_dir():
            matches = sorted(p for p in Path(text).iterdir() if p.suffix in PROFILE_SUFFIXES and p.is_file())
            if not matches:
                raise ConfigError(
                    f"-f {text}: no {', '.join(PROFILE_SUFFIXES)} files in this directory",
                    hint="name the files, or the directory that holds them",
                )
        else:  # a file, or a missing one the loader reports as it reports every file it cannot read
            matches = [Path(text)]
        found.extend(m for m in matches if m not in found)
    return found


def one_file(specs: Iterable[str | Path] | None, *, command: str) -> Path | None:
    """The single file a command that acts on one profile was given (None: no -f)."""
    files = expand_files(specs or [])
    if len(files) > 1:
        raise ConfigError(
            f"{command} takes one profile, -f names {len(files)}: {', '.join(map(str, files))}",
            hint=f"run {command} once per profile",
        )
    return files[0] if files else None


def required_files(specs: Iterable[str | Path] | None, *, command: str) -> list[Path]:
    """At least one file, as ``expand_files``."""
    files = expand_files(specs or [])
    if not files:
        raise ConfigError(f"{command}: no profile given", hint=f"infctl {command} -f PROFILE.yaml")
    return files


def load_each(paths: list[Path], load: Callable[[Path], T]) -> list[T]:
    """``load`` every file; each that fails is reported, and then one error counts them, so one bad profile
    does not hide the next (render, diff and deploy load them all before doing anything)."""
    from infctl.cli.output import report

    loaded: list[T] = []
    failed = 0
    for path in paths:
        try:
            loaded.append(load(path))
        except InfctlError as err:
            if len(paths) == 1:
                raise
            failed += 1
            report(err)
    if failed:
        raise ConfigError(f"{failed} of {len(paths)} profiles are invalid", hint="fix the files above")
    return loaded


def check_writable(flag: str, path: Path | None, *, directory: bool = False) -> None:
    """ConfigError unless ``path`` (given as ``flag``; ``directory``: a directory to write files in) can be
    written, checked before the work that fills it: a benchmark or a simulation lost to a typo in its output
    path is a run lost, and a render into a file ended in a traceback. Nothing is created here."""
    if path is None:
        return
    if path.is_dir() and not directory:
        raise ConfigError(f"{flag} {path}: a directory, not a file", hint=f"name a file: {flag} {path}/NAME")
    if path.exists() and directory and not path.is_dir():
        raise ConfigError(f"{flag} {path}: a file, not a directory", hint=f"name a directory: {flag} DIR")
    nearest = next(p for p in (path.absolute(), *path.absolute().parents) if p.exists())
    if nearest != path.absolute() and not nearest.is_dir():
        raise ConfigError(f"{flag} {path}: {nearest} is a file, not a directory", hint="choose another path")
    if not os.access(nearest, os.W_OK | (os.X_OK if nearest.is_dir() else 0)):
        raise ConfigError(f"{flag} {path}: {nearest} is not writable", hint="choose a writable path")


def check_run_dir(given: Path | None, resolved: Path) -> None:
    """:func:`check_writable` for the directory a local release keeps its state and logs in (``resolved``,
    from ``--run-dir`` when ``given``, else the profile's or the default), before any process starts."""
    if given is not None:
        check_writable("--run-dir", resolved, directory=True)
        return
    try:
        check_writable("run directory", resolved, directory=True)
    except ConfigError as err:
        raise ConfigError(
            err.message, hint="pass --run-dir DIR, or change local.run_dir or $INFCTL_RUN_DIR"
        ) from None
