"""``infctl delete``: stop a local release and remove its state (logs stay)."""

from __future__ import annotations

import typer

from infctl.cli.context import global_options
from infctl.cli.output import emit, errors_as_exit
from infctl.cli.status import FileOption, ReleaseOption, RunDirOption, release_of
from infctl.errors import ConfigError
from infctl.local import delete


def delete_cmd(
    ctx: typer.Context, file: FileOption = None, release: ReleaseOption = None, run_dir: RunDirOption = None
) -> None:
    """Stop a local release and remove its state (logs stay).

    The supervisor stops the router, then the engines (SIGTERM, then SIGKILL after a grace period); leftover
    processes of a supervisor that died are killed. Deleting a release that does not run is not an error.
    """
    opts = global_options(ctx)
    with errors_as_exit():
        name, directory = release_of(file, release, run_dir)
        if name is None:
            raise ConfigError("name the release to delete", hint="infctl delete --release NAME")
        emit(opts, delete(directory, name), table=lambda r: str(r["message"]))


def register(app: typer.Typer) -> None:
    app.command("delete")(delete_cmd)
