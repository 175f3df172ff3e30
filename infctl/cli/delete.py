"""``infctl delete``: stop a local release and remove its state (logs stay)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from infctl.cli.context import GlobalOptions, global_options
from infctl.cli.output import emit, errors_as_exit
from infctl.cli.status import FileOption, ReleaseOption, RunDirOption, TargetOption, kube_release, release_of
from infctl.errors import ConfigError
from infctl.local import delete

if TYPE_CHECKING:
    from infctl.kube import DryRun


def delete_cmd(
    ctx: typer.Context,
    file: FileOption = None,
    release: ReleaseOption = None,
    run_dir: RunDirOption = None,
    target: TargetOption = None,
    dry_run: Annotated[
        str, typer.Option("--dry-run", help="Kubernetes: none, client (list only) or server.")
    ] = "none",
) -> None:
    """Stop a local release and remove its state (logs stay), or delete a Kubernetes release's objects.

    Local: the supervisor stops the router, then the engines (SIGTERM, then SIGKILL after a grace period);
    leftover processes of a supervisor that died are killed. Kubernetes: every object labelled with the
    release goes, traffic first, engines last; the namespace stays. Deleting nothing is not an error.
    """
    opts = global_options(ctx)
    with errors_as_exit():
        kube = kube_release(file, release, target)
        if kube is not None:
            _delete_kubernetes(opts, *kube, dry_run)
            return
        name, directory = release_of(file, release, run_dir)
        if name is None:
            raise ConfigError("name the release to delete", hint="infctl delete --release NAME")
        emit(opts, delete(directory, name), table=lambda r: str(r["message"]))


def _delete_kubernetes(opts: GlobalOptions, name: str, namespace: str | None, dry_run: str) -> None:
    from infctl.cli.diff import cluster
    from infctl.kube import delete_release

    if dry_run not in ("none", "client", "server"):
        raise ConfigError(f"--dry-run: expected none, client or server, found {dry_run!r}")
    client = cluster(opts)
    ns = namespace or client.namespace
    mode: DryRun = "client" if dry_run == "client" else "server" if dry_run == "server" else "none"
    deleted = delete_release(client, release=name, namespace=ns, dry_run=mode)
    verb = "deleted" if mode == "none" else "would delete"
    data = {
        "release": name,
        "namespace": ns,
        "dry_run": mode,
        "deleted": [{"kind": k, "name": n} for k, n in deleted],
    }
    message = (
        f"{verb} {len(deleted)} objects of {name} in {ns}"
        if deleted
        else f"nothing to delete for {name} in {ns}"
    )
    emit(opts, data, table=lambda _: message)


def register(app: typer.Typer) -> None:
    app.command("delete")(delete_cmd)
