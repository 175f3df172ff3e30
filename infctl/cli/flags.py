"""Flags several commands share, declared once so that a name means one thing everywhere (docs/cli.md)."""

from __future__ import annotations

import shlex
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


def check_url(flag: str, value: str, *, spec: bool = False) -> str:
    """``value`` given as ``flag``, an ``http(s)://host[:port]`` base URL (``spec``: the URL before a
    ``,key=value`` list); else ConfigError, so a URL without its scheme is bad input (exit 2, docs/cli.md)
    before anything is contacted, not a failed check or connection (exit 1). The rule is the router's for
    its backends (:func:`infctl.config.router.check_engine_url`): every URL flag refuses the same."""
    from infctl.config.router import check_engine_url  # here: `infctl --help` imports this module

    url = value.split(",", 1)[0].strip() if spec else value
    try:
        check_engine_url(url)
    except ValueError as exc:
        fixed = (
            f"{flag} {shlex.quote('http://' + value)}"
            if "://" not in url
            else f"e.g. {flag} http://127.0.0.1:8000"
        )
        named = f"{flag} {value}" if url != value else flag  # the found URL is in the message
        raise ConfigError(f"{named}: {exc}", hint=fixed) from None
    return value


def url_option(*names: str, help: str, spec: bool = False, **kwargs: object) -> typer.models.OptionInfo:
    """A ``typer.Option`` taking a URL (``spec``: ``URL[,key=value...]``), each value read by
    :func:`check_url` as the command line is parsed: one red line and exit 2 on a bad one."""

    def checked(param: typer.CallbackParam, value: str | Sequence[str] | None) -> object:
        from infctl.cli.output import fail  # here: `infctl --help` imports this module, not output

        for one in [value] if isinstance(value, str) else value or ():
            try:
                check_url(max(param.opts, key=len), one, spec=spec)
            except ConfigError as err:
                fail(err)
        return value

    kwargs.setdefault("metavar", "URL[,key=value]" if spec else "URL")
    option: typer.models.OptionInfo = typer.Option(
        *names,
        callback=checked,
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
