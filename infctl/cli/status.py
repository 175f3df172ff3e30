"""``infctl status``: the processes of a local release, with a live health probe of each."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from infctl.cli.context import GlobalOptions, global_options
from infctl.cli.output import emit, errors_as_exit, simple_table
from infctl.config import load_deployment
from infctl.errors import ConfigError, KubeError
from infctl.local import list_releases, status
from infctl.local.paths import resolve_run_dir

FileOption = Annotated[
    Path | None, typer.Option("-f", "--file", help="Deployment profile; its name is the release.")
]
NameArgument = Annotated[
    str | None, typer.Argument(metavar="[NAME]", help="Release (deployment) name.", show_default=False)
]
ReleaseOption = Annotated[str | None, typer.Option("--release", help="The release name, as NAME.")]
RunDirOption = Annotated[
    Path | None,
    typer.Option(
        "--run-dir",
        help="Where local releases keep state; default: the profile's local.run_dir, else $INFCTL_RUN_DIR, "
        "else ~/.local/state/infctl/releases ($XDG_STATE_HOME).",
    ),
]


def release_name(name: str | None, release: str | None) -> str | None:
    """NAME or ``--release NAME`` (its alias); both must agree."""
    if name is not None and release is not None and name != release:
        raise ConfigError(f"NAME {name!r} and --release {release!r} disagree", hint="give the name once")
    return name if name is not None else release


def release_of(file: Path | None, release: str | None, run_dir: Path | None) -> tuple[str | None, Path]:
    """The release and run directory named by ``-f`` or NAME (None: neither was given)."""
    if file is not None and release is not None:
        raise ConfigError("give -f PROFILE or NAME, not both", hint="drop one of them")
    if file is not None:
        profile = load_deployment(file)
        return profile.name, resolve_run_dir(run_dir, profile.local.run_dir)
    return release, resolve_run_dir(run_dir)


TargetOption = Annotated[
    str | None,
    typer.Option("--target", help="local or kubernetes; default: the profile's target, else local."),
]


def kube_release(file: Path | None, release: str | None, target: str | None) -> tuple[str, str | None] | None:
    """(release, the profile's namespace) when the command is about a Kubernetes release; None for local."""
    if target not in (None, "local", "kubernetes"):
        raise ConfigError(f"--target: expected local or kubernetes, found {target!r}")
    if target == "local":
        return None
    if file is not None:
        profile = load_deployment(file)
        return (profile.name, profile.namespace) if "kubernetes" in (profile.target, target) else None
    if target == "kubernetes":
        if release is None:
            raise ConfigError("name the release", hint="add NAME or -f PROFILE")
        return release, None
    return None


def kube_status(opts: GlobalOptions, name: str, namespace: str | None) -> None:
    from infctl.cli.diff import cluster
    from infctl.kube import release_status

    client = cluster(opts)
    ns = namespace or client.namespace
    rows = release_status(client, release=name, namespace=ns)
    if not rows:
        raise KubeError(
            f"no objects of release {name!r} in namespace {ns}",
            hint="check -n NAMESPACE and --context, or deploy it: infctl deploy -f PROFILE",
        )
    objects = [{"kind": r.kind, "name": r.name, "ready": r.ready, "detail": r.detail} for r in rows]
    ready = all(r.ready for r in rows)
    data = {"release": name, "namespace": ns, "ready": ready, "objects": objects}
    title = f"{name} in {ns}: {'ready' if ready else 'not ready'}"
    cells = [(r.kind, r.name, "[green]yes[/]" if r.ready else "[red]no[/]", r.detail) for r in rows]
    emit(opts, data, table=lambda _: simple_table(title, ["kind", "name", "ready", "detail"], cells))


def status_cmd(
    ctx: typer.Context,
    name: NameArgument = None,
    file: FileOption = None,
    release: ReleaseOption = None,
    run_dir: RunDirOption = None,
    target: TargetOption = None,
) -> None:
    """Show a release: a local one's processes (URL, status, restarts, live health probe), or a Kubernetes
    one's objects and their readiness.

    With neither NAME nor -f, every local release under the run directory is listed.
    """
    opts = global_options(ctx)
    with errors_as_exit():
        release = release_name(name, release)
        kube = kube_release(file, release, target)
        if kube is not None:
            kube_status(opts, *kube)
            return
        name, directory = release_of(file, release, run_dir)
        if name is not None:
            emit(opts, status(directory, name), table=status_table)
            return
        reports = [status(directory, n) for n in list_releases(directory)]
        if not reports:
            emit(opts, [], table=lambda _: f"no local releases in {directory}")
            return
        emit(opts, reports, table=releases_table)


EXAMPLES = """
Examples:

  infctl status                          # every local release

  infctl status local-demo -o json       # one release (--release NAME works too)

  infctl status -f profiles/qwen3-8b-aggregated.yaml -n inference   # a Kubernetes release
"""

COLUMNS = ["name", "role", "url", "status", "health", "restarts", "pid"]


def whole_urls(table: Table) -> Table:
    """URLs are what people copy from these tables: never cut them, squeeze the other columns instead."""
    for column in table.columns:
        if column.header == "url":
            column.no_wrap, column.min_width = True, len("http://127.0.0.1:65535")
    return table


def _rows(report: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [
        (
            p["name"],
            _role(p),
            p["url"],
            p["status"],
            "[green]up[/]" if p["healthy"] else "[red]down[/]",
            p["restarts"],
            p["pid"],
        )
        for p in report["processes"]
    ]


def _role(process: dict[str, Any]) -> str:
    """The engine's role, with the data-parallel rank count when it serves several ranks behind its URL;
    blank for the router and autoscaler, which have none (not the word None)."""
    role, ranks = process.get("role"), process.get("data_parallel_size") or 1
    if role is None:
        return ""
    return f"{role} (DP {ranks})" if ranks > 1 else str(role)


def releases_table(reports: list[dict[str, Any]]) -> Table:
    """One row per process of every release (narrower: no role, no pid)."""
    rows = [
        (f"{r['release']} ({r['status']})", name, url, status, health, restarts)
        for r in reports
        for name, _, url, status, health, restarts, _ in _rows(r)
    ]
    return whole_urls(
        simple_table("local releases", ["release", "name", "url", "status", "health", "restarts"], rows)
    )


def status_table(report: dict[str, Any]) -> Table:
    title = f"{report['release']}: {report['status']} (supervisor pid {report['supervisor_pid']})"
    table = whole_urls(simple_table(title, COLUMNS, _rows(report)))
    if report["status"] == "stale":
        table.caption = f"the supervisor is gone; clean up with: infctl delete {report['release']}"
    elif report.get("error"):
        table.caption = report["error"]
    return table


def register(app: typer.Typer) -> None:
    app.command("status", epilog=EXAMPLES)(status_cmd)
