"""Root of the ``infctl`` command: global options, and the commands, each imported only when it runs.

``infctl --help`` and ``--version`` import no command module (the list below carries their one-line help),
so they answer in about a tenth of a second; ``infctl bench ...`` imports bench alone. A command is loaded by
:class:`InfctlGroup` from its module's ``register(app)``, and the global options (``--kubeconfig``,
``--context``, ``-n``, ``-o``, ``-v``) are added to it and to its subcommands, so they are accepted before
or after the command name (``infctl -o json status`` and ``infctl status -o json``). A command that declares
one of those names itself keeps its own (``infctl bench -n 200`` counts requests).
"""

from __future__ import annotations

import copy
import importlib
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer
import typer.core
import typer.main

from infctl import __version__
from infctl.cli.context import GlobalOptions, OutputFormat
from infctl.cli.flags import bare_dry_run

COMMANDS: dict[str, tuple[str, str]] = {
    "validate": ("infctl.cli.validate", "Check profiles as deploy and render load them; summarise them."),
    "deploy": ("infctl.cli.deploy", "Deploy a profile: to Kubernetes, or as processes on this host."),
    "status": ("infctl.cli.status", "Show a release: its processes or objects, and their health."),
    "delete": ("infctl.cli.delete", "Stop a release and remove everything it left."),
    "demo": ("infctl.cli.demo", "Run the local demo stack, compare policies on it, stop it."),
    "router": ("infctl.cli.router", "Route OpenAI requests by prefix cache, load and length."),
    "render": ("infctl.cli.render", "Render a deployment profile into Kubernetes objects."),
    "diff": ("infctl.cli.diff", "Compare the rendered release with the cluster."),
    "doctor": ("infctl.cli.doctor", "Check a cluster, engines, a router or a local release."),
    "autoscaler": ("infctl.cli.autoscaler", "Scale prefill, decode and groups on queue, KV and TTFT."),
    "sim": ("infctl.cli.sim", "Run simulated vLLM/SGLang engines (HTTP, metrics, KV events)."),
    "bench": ("infctl.cli.bench", "Benchmark an OpenAI server: TTFT, TPOT, ITL, E2E, goodput."),
    "cutover": ("infctl.cli.cutover", "Move traffic from the old system to the new one, gated."),
    "simulate": ("infctl.cli.simulate", "Simulate a cluster on a virtual clock: router, autoscaler."),
    "supervise": ("infctl.cli.deploy", ""),
}
"""Every command: the module whose ``register(app)`` adds it, its line in ``infctl --help`` ("": hidden)."""

GLOBAL_PANEL = "Global options"
_FIELDS = {"kubeconfig": Path, "context": str, "namespace": str, "output": OutputFormat, "verbose": int}


class InfctlGroup(typer.core.TyperGroup):
    """The root group: commands imported on first use, the global options added to each."""

    _listing = False

    def list_commands(self, ctx: Any) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in COMMANDS:
            return None
        module, line = COMMANDS[cmd_name]
        if self._listing:  # `infctl --help`: the line is enough, the module stays unimported
            return typer.core.TyperCommand(name=cmd_name, short_help=line, hidden=not line)
        if cmd_name not in self.commands:
            self.commands[cmd_name] = with_global_options(load_command(module, cmd_name))
        return self.commands[cmd_name]

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        return super().parse_args(ctx, bare_dry_run(args))

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


def load_command(module: str, name: str) -> Any:
    """The click command ``name`` that ``module.register`` adds to an app."""
    holder = typer.Typer(rich_markup_mode="rich", add_completion=False)
    importlib.import_module(module).register(holder)
    return typer.main.get_group(holder).commands[name]


def with_global_options(command: Any) -> Any:
    """``command`` (and, for a group, every subcommand) also accepting the global options, but for the
    names it declares itself."""
    taken = {name for p in command.params for name in (*p.opts, *p.secondary_opts)}
    for template in _global_params():
        opts = [o for o in template.opts if o not in taken]
        if not opts:
            continue
        param = copy.copy(template)
        param.opts, param.secondary_opts, param.envvar = opts, [], None
        param.rich_help_panel = GLOBAL_PANEL
        command.params.append(param)
    for sub in getattr(command, "commands", {}).values():
        with_global_options(sub)
    return command


def _store(ctx: Any, param: Any, value: Any) -> None:
    """A global option given after the command name: recorded as if given before it."""
    if value is None or (param.name == "verbose" and not value):
        return
    root = ctx.find_root()
    current = root.obj if isinstance(root.obj, GlobalOptions) else GlobalOptions()
    if param.name == "verbose":
        value = current.verbose + value
        _configure_logging(value)
    root.obj = replace(current, **{param.name: _FIELDS[param.name](value)})


_TEMPLATES: list[Any] = []


def _global_params() -> list[Any]:
    """The global options as click parameters (built once, by Typer, from :func:`_globals`)."""
    if not _TEMPLATES:
        holder = typer.Typer(add_completion=False)
        holder.command()(_globals)
        for param in typer.main.get_command(holder).params:
            param.callback, param.expose_value, param.default = _store, False, None
            param.show_default = False  # type: ignore[attr-defined]
            _TEMPLATES.append(param)
    return _TEMPLATES


def _globals(
    kubeconfig: Annotated[
        Path | None, typer.Option("--kubeconfig", help="Path to the kubeconfig file.")
    ] = None,
    context: Annotated[str | None, typer.Option("--context", help="kubeconfig context to use.")] = None,
    namespace: Annotated[str | None, typer.Option("-n", "--namespace", help="Kubernetes namespace.")] = None,
    output: Annotated[
        OutputFormat | None, typer.Option("-o", "--output", help="Output format: table, json or yaml.")
    ] = None,
    verbose: Annotated[int, typer.Option("-v", "--verbose", count=True, help="More logging (-v, -vv).")] = 0,
) -> None:
    """The global options' declarations, for :func:`_global_params`."""


app = typer.Typer(
    name="infctl",
    cls=InfctlGroup,
    help=(
        "Operate LLM inference fleets (vLLM, SGLang) the cloud-native way.\n\n"
        "Start with the demo, no GPU needed:\n\n"
        "  infctl demo\n\n"
        "Global options go before or after the command: infctl status -o json."
    ),
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,  # the root's help in plain text: Rich's formatter alone costs ~0.1 s to import
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"infctl {__version__}")
        raise typer.Exit()


def _configure_logging(verbose: int) -> None:
    import logging  # here: --help and --version never need it

    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger().setLevel(level)


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
    _configure_logging(verbose)
    ctx.obj = GlobalOptions(
        kubeconfig=kubeconfig, context=context, namespace=namespace, output=output, verbose=verbose
    )


def _register() -> None:
    """Kept for callers of the eager registry: commands now load on first use, nothing to do."""


def run() -> None:
    app(prog_name="infctl")
