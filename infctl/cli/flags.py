"""Flags several commands share, declared once so that a name means one thing everywhere (docs/cli.md)."""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Annotated

import typer
from pydantic import BaseModel

from infctl import durations
from infctl.errors import ConfigError


class DryRunMode(StrEnum):
    """kubectl's ``--dry-run``: none writes; client shows what would be written; server has the API server
    check every write and keep none."""

    none = "none"
    client = "client"
    server = "server"


DryRunOption = Annotated[
    DryRunMode,
    typer.Option(
        "--dry-run",
        help="none: write; client (also --dry-run alone): show what would be written, write nothing; "
        "server: the API server checks every write and keeps none.",
    ),
]


def bare_dry_run(args: Sequence[str]) -> list[str]:
    """``--dry-run`` given without a mode, as kubectl still takes it, becomes ``--dry-run=client``."""
    modes = {m.value for m in DryRunMode}
    out = list(args)
    for i, arg in enumerate(out):
        if arg == "--":
            break
        if arg == "--dry-run" and (i + 1 == len(out) or out[i + 1] not in modes):
            out[i] = "--dry-run=client"
    return out


def client_side(mode: DryRunMode, *, what: str) -> bool:
    """Whether to write nothing, for a command whose target has no server-side dry run (``what``)."""
    if mode is DryRunMode.server:
        raise ConfigError(f"--dry-run=server: {what} has no server-side dry run", hint="use --dry-run=client")
    return mode is DryRunMode.client


def seconds(text: str | float) -> float:
    """A duration flag's value in seconds: ``90s``, ``500ms``, ``10m``, ``1h`` or bare seconds
    (:func:`infctl.durations.parse_duration`)."""
    try:
        return durations.parse_duration(text)
    except ConfigError as err:
        raise typer.BadParameter(f"cannot read {text!r} as a duration; {err.hint}") from None


def duration_option(*names: str, help: str, **kwargs: object) -> typer.models.OptionInfo:
    """A ``typer.Option`` whose value is read by :func:`seconds` (annotate the parameter ``float``)."""
    option: typer.models.OptionInfo = typer.Option(
        *names,
        parser=seconds,
        metavar="DURATION",
        help=help,
        **kwargs,  # type: ignore[arg-type]
    )
    return option


def field_help(model: type[BaseModel], name: str, *, key: str | None = None) -> str:
    """The help of a flag that sets settings field ``name``: the field's own doc (pydantic keeps attribute
    docstrings), so its meaning and default are written once, beside the field; ``key`` names the file key
    the flag overrides (default ``name``)."""
    doc = " ".join((model.model_fields[name].description or "").replace("``", "'").split())
    return f"{doc} Overrides the file's {key or name}."
