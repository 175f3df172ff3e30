"""``infctl deploy``: run a deployment profile (local target: supervised processes on this machine)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.live import Live
from rich.table import Table

from infctl.cli.context import GlobalOptions, OutputFormat, global_options
from infctl.cli.diff import cluster, rendered
from infctl.cli.files import FilesOption, check_run_dir, load_each, required_files
from infctl.cli.flags import DryRunMode, DryRunOption, duration_option
from infctl.cli.output import console, emit, err_console, errors_as_exit, simple_table
from infctl.cli.render_flags import with_render_flags
from infctl.cli.status import RunDirOption, whole_urls
from infctl.config import DeploymentProfile, load_deployment
from infctl.errors import ConfigError
from infctl.kube import AdminSecret, DeployOptions, deploy_release
from infctl.local import LocalPlan, RunState, SupervisorSettings, build_plan, port_is_free
from infctl.local.admin_token import token_path
from infctl.local.deploy import check_not_running, prepare, read_plan, start_detached
from infctl.local.paths import default_run_dir, resolve_run_dir
from infctl.local.supervisor import run as run_supervisor
from infctl.manifests import RenderOptions
from infctl.manifests.admin_secret import ADMIN_TOKEN_ENV


class DeployTarget(StrEnum):
    local = "local"
    kubernetes = "kubernetes"


EXAMPLES = """
Examples:

  infctl deploy --target local -f profiles/local-demo.yaml            # foreground, Ctrl-C stops it

  infctl deploy --target local -f profiles/local-demo.yaml --detach   # background; see `infctl status`

  infctl deploy -f profiles/local-demo.yaml --set local.base_port=18000 --set replicas=3

  infctl deploy -f profiles/qwen3-8b-aggregated.yaml             # Kubernetes: apply, wait, prune

  infctl deploy -f profiles/kimi-k2-pool.yaml --dry-run=server   # the server checks, nothing stays

Kubernetes exit codes: 0 deployed and ready, 1 the API refused, 2 bad profile or flag, or no kubeconfig,
3 a CRD is missing, 4 a field-manager conflict (--force-conflicts), 5 not ready within --timeout.
"""


@with_render_flags
def deploy(
    ctx: typer.Context,
    files: FilesOption = None,
    target: Annotated[
        DeployTarget | None, typer.Option("--target", help="Where to run; default: the profile's `target`.")
    ] = None,
    overrides: Annotated[
        list[str] | None,
        typer.Option("--set", metavar="KEY.PATH=VALUE", help="Override a profile key, e.g. replicas=3."),
    ] = None,
    detach: Annotated[
        bool, typer.Option("--detach", help="Run in the background; return once healthy.")
    ] = False,
    run_dir: RunDirOption = None,
    timeout: Annotated[
        float | None,
        duration_option(
            "--timeout",
            help="Time to become healthy (90s, 10m): per process (local, default 3m), or in all "
            "(kubernetes, default 30m).",
        ),
    ] = None,
    dry_run: DryRunOption = DryRunMode.none,
    force_conflicts: Annotated[
        bool, typer.Option("--force-conflicts", help="Kubernetes: take over fields another manager owns.")
    ] = False,
    wait: Annotated[
        bool, typer.Option("--wait/--no-wait", help="Kubernetes: wait for readiness between phases.")
    ] = True,
    prune: Annotated[
        bool,
        typer.Option(
            "--prune/--no-prune", help="Kubernetes: delete this release's objects no longer rendered."
        ),
    ] = True,
    *,
    options: RenderOptions,
) -> None:
    """Deploy profiles (-f repeatable, a directory or a glob): to Kubernetes, or with --target local as
    supervised processes on this machine.

    Engines (simulated, or real when local.simulate is false), router and autoscaler run as processes with
    logs in RUN_DIR/<name>/logs; crashed ones restart with exponential backoff; Ctrl-C stops them all. The
    router listens on the profile's router.port when it sets one. Several local profiles need --detach.
    """
    opts = global_options(ctx)
    with errors_as_exit():
        paths = required_files(files, command="deploy")
        profiles = load_each(paths, lambda f: load_target_profile(f, target, overrides or []))
        local = [p for p in profiles if p.target == "local"]
        if len(profiles) > 1 and local and not detach:
            raise ConfigError(
                f"{len(profiles)} profiles, {len(local)} of them local: one runs in the foreground at a time",
                hint="add --detach to start them all in the background",
            )
        if dry_run is not DryRunMode.none and local:
            raise ConfigError(
                "--dry-run applies to Kubernetes releases", hint="drop --dry-run for local ones"
            )
        for profile in profiles:
            _deploy_one(
                opts, profile, options, run_dir, timeout, detach, dry_run, force_conflicts, wait, prune
            )


def _deploy_one(
    opts: GlobalOptions,
    profile: DeploymentProfile,
    options: RenderOptions,
    run_dir: Path | None,
    timeout: float | None,
    detach: bool,
    dry_run: DryRunMode,
    force_conflicts: bool,
    wait: bool,
    prune: bool,
) -> None:
    if profile.target == "kubernetes":
        steps = DeployOptions(
            force=force_conflicts,
            dry_run=dry_run.value,
            wait=wait,
            prune=prune,
            timeout_s=timeout if timeout is not None else DeployOptions.timeout_s,
        )
        deploy_kubernetes(opts, profile, options, steps)
        return
    plan = local_plan(profile, run_dir)
    settings = SupervisorSettings(
        health_timeout=timeout if timeout is not None else SupervisorSettings.health_timeout
    )
    prepare(plan, settings)
    if detach:
        with err_console.status("starting...") as spinner:
            state = start_detached(plan, settings, on_change=lambda s: spinner.update(_progress(s)))
        table = process_table(state, plan=plan, stop=delete_command(plan))
        emit(opts, state_summary(plan, state), table=lambda _: table)
    elif opts.output is OutputFormat.table:
        err_console.print(_token_line(plan), highlight=False, markup=False, soft_wrap=True)
        with Live(process_table(None, plan=plan), console=console, refresh_per_second=4) as live:
            state = run_supervisor(plan, settings, on_change=lambda s: live.update(process_table(s)))
        logs = plan.release_dir / "logs"
        console.print(f"stopped local release [bold]{plan.release}[/]; logs in {logs}")
    else:
        emit(opts, state_summary(plan, run_supervisor(plan, settings)))


def load_target_profile(file: Path, target: DeployTarget | None, overrides: list[str]) -> DeploymentProfile:
    sets = [*overrides, *([f"target={target.value}"] if target is not None else [])]
    return load_deployment(file, sets)


def deploy_kubernetes(
    opts: GlobalOptions, profile: DeploymentProfile, render_options: RenderOptions, steps: DeployOptions
) -> None:
    """Render, apply in order, wait, prune; progress lines on stderr, the summary through ``emit``."""
    client = cluster(opts)
    objects, namespace = rendered(opts, client, profile, render_options)
    printer = _KubeProgress(quiet=opts.output is not OutputFormat.table)
    report = deploy_release(
        client, objects, release=profile.name, namespace=namespace, options=steps, on_event=printer
    )
    summary = {
        "release": report.release,
        "namespace": report.namespace,
        "dry_run": report.dry_run,
        "namespace_created": report.namespace_created,
        "applied": [{"kind": a.kind, "name": a.name, "action": a.action} for a in report.applied],
        "pruned": [{"kind": k, "name": n} for k, n in report.pruned],
        "ready": [
            {"kind": r.kind, "name": r.name, "ready": r.ready, "detail": r.detail} for r in report.readiness
        ],
        "admin_token": _admin_token(report.admin_secret),
    }
    emit(opts, summary, table=_kube_summary)


def _admin_token(secret: AdminSecret | None) -> dict[str, str] | None:
    """Where the router's admin token is and how to read it (the token itself is never printed)."""
    if secret is None:
        return None
    ref = secret.ref
    return {
        "secret": ref.name,
        "namespace": ref.namespace,
        "key": ref.key,
        "action": secret.action,
        "env": ADMIN_TOKEN_ENV,
        "read": secret.read_command,
    }


class _KubeProgress:
    """Deploy events as one stderr line each (waiting lines only when something changed)."""

    def __init__(self, *, quiet: bool) -> None:
        self.quiet = quiet
        self.last = ""

    def __call__(self, event: str, data: Any) -> None:
        if self.quiet:
            return
        if event == "secret":
            line = f"  Secret/{data.ref.name} (router admin token) {data.action}"
        elif event == "phase":
            line = f"[bold]{data}[/]"
        elif event == "applied":
            line = f"  {data.kind}/{data.name} {data.action}"
        elif event == "pruned":
            line = f"  {data[0]}/{data[1]} pruned"
        else:
            line = "  waiting: " + ", ".join(f"{r.name} {r.detail}" for r in data)
        if line != self.last:
            err_console.print(line, highlight=False, soft_wrap=True)
            self.last = line


def _kube_summary(s: dict[str, Any]) -> str:
    verb = "would apply" if s["dry_run"] != "none" else "applied"
    ready = (
        "" if not s["ready"] else f", {sum(r['ready'] for r in s['ready'])}/{len(s['ready'])} workloads ready"
    )
    line = (
        f"{s['release']} in namespace {s['namespace']}: {verb} {len(s['applied'])} objects, "
        f"pruned {len(s['pruned'])}{ready}"
    )
    token = s["admin_token"]
    if token is None:
        return line
    return (
        f"{line}\nrouter admin token: Secret {token['secret']} ({token['action']}); for the admin API, "
        f"cutover and doctor:\n  export {token['env']}=$({token['read']})"
    )


def local_plan(profile: DeploymentProfile, run_dir: Path | None) -> LocalPlan:
    resolved = resolve_run_dir(run_dir, profile.local.run_dir)
    check_run_dir(run_dir, resolved)
    check_not_running(resolved, profile.name)  # before the ports: a running release holds its own
    return build_plan(profile, is_free=port_is_free, run_dir=resolved)


def supervise(plan_file: Annotated[Path, typer.Argument(help="plan.json of the release.")]) -> None:
    """Run a local release's supervisor from its plan file (what `deploy --detach` starts)."""
    with errors_as_exit():
        plan, settings = read_plan(plan_file)
        run_supervisor(plan, settings)


def delete_command(plan: LocalPlan) -> str:
    """The command that stops ``plan``'s release from another shell."""
    command = f"infctl delete {plan.release}"
    # the default unchecked: one that is a file must not fail a deploy given a good --run-dir
    return command if plan.run_dir == default_run_dir().absolute() else f"{command} --run-dir {plan.run_dir}"


def state_summary(plan: LocalPlan, state: RunState) -> dict[str, Any]:
    return {
        "release": state.release,
        "stop": delete_command(plan),
        "status": state.status,
        "supervisor_pid": state.supervisor_pid,
        "url": plan.entrypoint.url,
        "model": plan.model,
        "run_dir": str(plan.run_dir),
        "admin_token": _local_token(plan),
        "processes": [
            {
                "name": p.name,
                "kind": p.kind,
                "role": p.role,
                "url": p.url,
                "status": p.status,
                "pid": p.pid,
                "restarts": p.restarts,
                "log": p.log,
            }
            for p in state.processes
        ],
    }


def _local_token(plan: LocalPlan) -> dict[str, str] | None:
    """Where a local router's admin token is kept (the supervisor creates it; the token is not printed)."""
    if not any(s.kind == "router" for s in plan.specs):
        return None
    path = token_path(plan)
    return {"file": str(path), "env": ADMIN_TOKEN_ENV, "read": f"cat {path}"}


def _token_line(plan: LocalPlan) -> str:
    token = _local_token(plan)
    if token is None:
        return "no router: no admin token"
    return f"router admin token: export {token['env']}=$({token['read']})"


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
        assert plan is not None
        table.caption = f"stop it with: {stop}\n{_token_line(plan)}"
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
