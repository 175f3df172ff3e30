"""Rendering results and errors. Commands hand plain data here; nothing else prints."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NoReturn

import typer

from infctl.cli.context import GlobalOptions, OutputFormat
from infctl.errors import InfctlError

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.table import Table

    console: Console
    """Standard output, through Rich."""
    err_console: Console
    """Standard error, through Rich."""


def __getattr__(name: str) -> Console:
    """``console`` and ``err_console``, made on first use: Rich costs ~40 ms of import, which a daemon that
    prints one line at start-up (``say``) need not pay before it serves."""
    if name not in ("console", "err_console"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return _console(name)


def _console(name: str) -> Console:
    made: Console | None = globals().get(name)
    if made is None:
        from rich.console import Console

        made = globals()[name] = Console(stderr=name == "err_console")
    return made


def say(line: str) -> None:
    """One plain line to standard error (a daemon's start-up line): no Rich, no markup, no wrapping."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def emit(
    opts: GlobalOptions,
    data: Any,
    *,
    table: Callable[[Any], RenderableType] | None = None,
) -> None:
    """Print ``data`` as JSON/YAML when asked, otherwise through ``table`` (or as YAML when there is none)."""
    if opts.output is OutputFormat.json:
        sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    elif opts.output is OutputFormat.yaml or table is None:
        import yaml

        sys.stdout.write(yaml.safe_dump(data, sort_keys=False))
    else:
        _console("console").print(table(data))


def simple_table(
    title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], *, numbers: bool = False
) -> Table:
    """A titled table; ``numbers`` right-aligns every column after the first (figures line up). A cell too
    wide for a narrow terminal (or a pipe's 80 columns) folds onto the next line: "3.3…" would misquote a
    figure."""
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    for i, c in enumerate(columns):
        t.add_column(c, justify="right" if numbers and i else "left", overflow="fold")
    for r in rows:
        t.add_row(*("" if v is None else str(v) for v in r))
    return t


def report(err: InfctlError) -> None:
    """One red line with what was wrong, one with the fix."""
    from rich.markup import escape

    stderr = _console("err_console")
    # Messages carry file:line and user text: never wrap them, never read them as markup.
    stderr.print(f"[bold red]error:[/] {escape(err.message)}", highlight=False, soft_wrap=True)
    if err.hint:
        stderr.print(f"[yellow]fix:[/] {escape(err.hint)}", highlight=False, soft_wrap=True)


def fail(err: InfctlError) -> NoReturn:
    """:func:`report` the error; exit with its code."""
    report(err)
    raise typer.Exit(err.exit_code)


@contextmanager
def errors_as_exit() -> Iterator[None]:
    """Turn InfctlError raised by core code into a clean message and exit code."""
    try:
        yield
    except InfctlError as err:
        fail(err)


def kv_table(title: str, data: Mapping[str, Any]) -> Table:
    return simple_table(title, ["key", "value"], [(k, v) for k, v in data.items()])
