"""``infctl deploy``: run a deployment profile (local target: supervised processes on this machine)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.live import Live
from rich.table import Table

from infctl.cli.context import OutputFormat, global_options
from infctl.cli.output import console, emit, err_console, errors_as_exit, simple_table
from infctl.cli.status import whole_urls
from infctl.config import DeploymentProfile, LocalSettings, load_deployment
from infctl.errors import InfctlError
from infctl.local import LocalPlan, RunState, SupervisorSettings, build_plan, port_is_free
from infctl.local.deploy import prepare, read_plan, start_detached
from infctl.local.supervisor import run as run_supervisor


class DeployTarget(StrEnum):
    local = "local"
    kubernetes = "kubernetes"


EXAMPLES = """
Examples:

  infctl deploy --target local -f profiles/local-demo.yaml            # foreground, Ctrl-C stops it

  infctl deploy --target local -f profiles/local-demo.yaml --detach   # background; see `infctl status`

  infctl deploy -f profiles/local-demo.yaml --set local.base_port=18000 --set replicas=3
"""


def deploy(
    ctx: typer.Context,
    file: Annotated[Path, typer.Option("-f", "--file", help="Deployment profile (YAML).")],
    target: Annotated[
        DeployTarget | None, typer.Option("--target", help="Where to run; default: the profile's `target`.")
    ] = None,
    overrides: Annotated[
        list[str] | None,
        typer.Option("--set", metavar="KEY.PATH=VALUE", help="Override a profile key, e.g. replicas=3."),
    ] = None,
    detach: Annotated[
        bool, typer.Option("--detach", "-d", help="Run in the background; return once healthy.")
    ] = False,
    run_dir: Annotated[
        Path | None, typer.Option("--run-dir", help="Logs and state go to RUN_DIR/<name>.")
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds each process has to become healthy.")
    ] = SupervisorSettings.health_timeout,
) -> None:
    """Deploy a profile; with --target local, as supervised processes on this machine.

    Engines (simulated, or real when local.simulate is false), router and autoscaler run as processes with
    logs in RUN_DIR/<name>/logs; crashed ones restart with exponential backoff; Ctrl-C stops them all.
    """
    opts = global_options(ctx)
    with errors_as_exit():
        profile = load_target_profile(file, target, overrides or [])
        plan = local_plan(profile, run_dir)
        settings = SupervisorSettings(health_timeout=timeout)
        prepare(plan, settings)
        if detach:
            with err_console.status("starting...") as spinner:
                state = start_detached(plan, settings, on_change=lambda s: spinner.update(_progress(s)))
            table = process_table(state, stop=delete_command(plan))
            emit(opts, state_summary(plan, state), table=lambda _: table)
        elif opts.output is OutputFormat.table:
            with Live(process_table(None, plan=plan), console=console, refresh_per_second=4) as live:
                state = run_supervisor(plan, settings, on_change=lambda s: live.update(process_table(s)))
            logs = plan.release_dir / "logs"
            console.print(f"stopped local release [bold]{plan.release}[/]; logs in {logs}")
        else:
            emit(opts, state_summary(plan, run_supervisor(plan, settings)))


def load_target_profile(file: Path, target: DeployTarget | None, overrides: list[str]) -> DeploymentProfile:
    if target is DeployTarget.kubernetes:
        _kubernetes_not_ready(file)
    sets = [*overrides, *([f"target={target.value}"] if target is not None else [])]
    profile = load_deployment(file, sets)
    if profile.target == "kubernetes":
        _kubernetes_not_ready(file)
    return profile


def _kubernetes_not_ready(file: Path) -> NoReturn:
    raise InfctlError(
        "deploying to Kubernetes is not implemented yet: it arrives with `infctl render` / `infctl deploy` "
        "(issue 5)",
        hint=f"run the deployment on this machine instead: infctl deploy --target local -f {file}",
    )


def local_plan(profile: DeploymentProfile, run_dir: Path | None) -> LocalPlan:
    return build_plan(profile, is_free=port_is_free, run_dir=(run_dir or profile.local.run_dir).absolute())


def supervise(plan_file: Annotated[Path, typer.Argument(help="plan.json of the release.")]) -> None:
    """Run a local release's supervisor from its plan file (what `deploy --detach` starts)."""
    with errors_as_exit():
        plan, settings = read_plan(plan_file)
        run_supervisor(plan, settings)


def delete_command(plan: LocalPlan) -> str:
    """The command that stops ``plan``'s release from another shell."""
    command = f"infctl delete --release {plan.release}"
    default = LocalSettings().run_dir.absolute()
    return command if plan.run_dir == default else f"{command} --run-dir {plan.run_dir}"


def state_summary(plan: LocalPlan, state: RunState) -> dict[str, Any]:
    return {
        "release": state.release,
        "stop": delete_command(plan),
        "status": state.status,
        "supervisor_pid": state.supervisor_pid,
        "url": plan.entrypoint.url,
        "model": plan.model,
        "run_dir": str(plan.run_dir),
        "processes": [
            {"name": p.name, "kind": p.kind, "role": p.role, "url": p.url, "status": p.status, "pid": p.pid,
             "restarts": p.restarts, "log": p.log}
            for p in state.processes
        ],
    }


def _progress(state: RunState) -> str:
    healthy = sum(p.status == "healthy" for p in state.processes)
    return f"starting {state.release}: {healthy}/{len(state.processes)} healthy"


def process_table(state: RunState | None, *, plan: LocalPlan | None = None, stop: str | None = None) -> Table:
    columns = ["name", "role", "url", "status", "restarts", "pid"]
    if state is None:
        assert plan is not None
        pending = [(s.name, s.role, s.url, "pending", 0, None) for s in plan.specs]
        return whole_urls(simple_table(f"{plan.release}: starting", columns, pending))
    rows = [(p.name, p.role, p.url, _status_cell(p.status), p.restarts, p.pid) for p in state.processes]
    table = whole_urls(simple_table(f"{state.release}: {state.status}", columns, rows))
    if stop is not None:
        table.caption = f"stop it with: {stop}"
    elif state.status in ("starting", "running"):
        table.caption = "Ctrl-C stops everything"
    return table


_COLOURS = {"healthy": "green", "starting": "yellow", "backoff": "red", "failed": "bold red"}


def _status_cell(status: str) -> str:
    colour = _COLOURS.get(status)
    return f"[{colour}]{status}[/]" if colour else status


def register(app: typer.Typer) -> None:
    app.command("deploy", epilog=EXAMPLES)(deploy)
    app.command("supervise", hidden=True)(supervise)
