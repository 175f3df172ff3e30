"""Root of the ``infctl`` command: global options and the list of commands."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

import typer

from infctl import __version__
from infctl.cli.context import GlobalOptions, OutputFormat

app = typer.Typer(
    name="infctl",
    help=(
        "Operate LLM inference fleets (vLLM, SGLang) the cloud-native way.\n\n"
        "Start with the local target, no GPU needed:\n\n"
        "  infctl deploy --target local -f profiles/local-demo.yaml"
    ),
    no_args_is_help=True,
    rich_markup_mode="rich",
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"infctl {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    kubeconfig: Annotated[
        Path | None, typer.Option("--kubeconfig", help="Path to the kubeconfig file.", envvar="KUBECONFIG")
    ] = None,
    context: Annotated[str | None, typer.Option("--context", help="kubeconfig context to use.")] = None,
    namespace: Annotated[str | None, typer.Option("-n", "--namespace", help="Kubernetes namespace.")] = None,
    output: Annotated[
        OutputFormat,
        typer.Option("-o", "--output", help="Output format: table for people, json/yaml for scripts."),
    ] = OutputFormat.table,
    verbose: Annotated[
        int, typer.Option("-v", "--verbose", count=True, help="More logging (-v info, -vv debug).")
    ] = 0,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    ctx.obj = GlobalOptions(
        kubeconfig=kubeconfig, context=context, namespace=namespace, output=output, verbose=verbose
    )


def _register() -> None:
    # Imported here so that each command module stays independent and `--help` lists only what exists.
    from infctl.cli import commands

    commands.register(app)


def run() -> None:
    _register()
    app()
