"""``infctl delete``: stop local releases and remove what they left, or delete Kubernetes releases."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from infctl.cli.context import GlobalOptions, global_options
from infctl.cli.files import FilesOption, expand_files
from infctl.cli.flags import DryRunMode, DryRunOption
from infctl.cli.output import emit, errors_as_exit
from infctl.cli.status import ReleaseOption, RunDirOption, TargetOption, kube_release, release_of
from infctl.errors import ConfigError
from infctl.local import delete

EXAMPLES = """
Examples:

  infctl delete local-demo                       # a local release: processes, state, token and logs

  infctl delete local-demo --keep-logs           # ... all but its logs

  infctl delete -f profiles/qwen3-8b-aggregated.yaml --dry-run=server   # what would go, checked by the API
"""


def delete_cmd(
    ctx: typer.Context,
    names: Annotated[
        list[str] | None, typer.Argument(metavar="[NAME]...", help="Release names.", show_default=False)
    ] = None,
    files: FilesOption = None,
    release: ReleaseOption = None,
    run_dir: RunDirOption = None,
    target: TargetOption = None,
    dry_run: DryRunOption = DryRunMode.none,
    keep_logs: Annotated[bool, typer.Option("--keep-logs", help="Local: keep the release's logs.")] = False,
) -> None:
    """Stop local releases and remove everything they left (state, plan, admin token, logs), or delete a
    Kubernetes release's objects.

    Local: the supervisor stops the router, then the engines (SIGTERM, then SIGKILL after a grace period);
    leftover processes of a supervisor that died are killed. Kubernetes: every object labelled with the
    release goes, traffic first, engines last; the namespace stays. Deleting nothing is not an error.
    """
    opts = global_options(ctx)
    with errors_as_exit():
        targets: list[tuple[Path | None, str | None]] = [(f, None) for f in expand_files(files or [])]
        targets += [(None, n) for n in [*(names or []), *([release] if release else [])]]
        if not targets:
            raise ConfigError("name the release to delete", hint="infctl delete NAME (or -f PROFILE)")
        results = [
            _delete_one(opts, file, name, run_dir, target, dry_run, keep_logs) for file, name in targets
        ]
    data = results[0] if len(results) == 1 else results
    emit(opts, data, table=lambda _: "\n".join(str(r["message"]) for r in results))


def _delete_one(
    opts: GlobalOptions,
    file: Path | None,
    name: str | None,
    run_dir: Path | None,
    target: str | None,
    dry_run: DryRunMode,
    keep_logs: bool,
) -> dict[str, Any]:
    kube = kube_release(file, name, target)
    if kube is not None:
        return _delete_kubernetes(opts, *kube, dry_run)
    release, directory = release_of(file, name, run_dir)
    assert release is not None
    if dry_run is not DryRunMode.none:
        raise ConfigError(
            "--dry-run applies to Kubernetes releases", hint="infctl status NAME shows what a local one runs"
        )
    return delete(directory, release, keep_logs=keep_logs)


def _delete_kubernetes(
    opts: GlobalOptions, name: str, namespace: str | None, dry_run: DryRunMode
) -> dict[str, Any]:
    from infctl.cli.diff import cluster
    from infctl.kube import delete_release

    client = cluster(opts)
    ns = namespace or client.namespace
    deleted = delete_release(client, release=name, namespace=ns, dry_run=dry_run.value)
    verb = "deleted" if dry_run is DryRunMode.none else "would delete"
    message = (
        f"{verb} {len(deleted)} objects of {name} in {ns}"
        if deleted
        else f"nothing to delete for {name} in {ns}"
    )
    return {
        "release": name,
        "namespace": ns,
        "dry_run": dry_run.value,
        "deleted": [{"kind": k, "name": n} for k, n in deleted],
        "message": message,
    }


def register(app: typer.Typer) -> None:
    app.command("delete", epilog=EXAMPLES)(delete_cmd)
