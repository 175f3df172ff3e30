"""``infctl diff``: what ``infctl deploy`` would change in the cluster, as a unified diff per object.

Also home of the helpers every Kubernetes-target command shares: the cluster client built from the global
options, and rendering a profile with the render flags.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from infctl.cli.context import GlobalOptions, OutputFormat, global_options
from infctl.cli.files import FilesOption, load_each, required_files
from infctl.cli.output import emit, err_console, errors_as_exit
from infctl.cli.render_flags import Overrides, render_options, with_render_flags
from infctl.config import DeploymentProfile, load_deployment
from infctl.kube import ClientSettings, KubeClient, ObjectDiff, connect, diff_release
from infctl.manifests import RenderOptions
from infctl.manifests.render import render  # the function (the package's `render` may be the module)

EXAMPLES = """
Examples:

  infctl diff -f profiles/qwen3-8b-aggregated.yaml             # a unified diff per object that would change

  infctl diff -f profiles/kimi-k2-pool.yaml --set pools.decode=6   # what a profile change would do

  infctl diff -f profiles/qwen3-8b-aggregated.yaml --exit-code  # in CI: exit 1 when the cluster differs

  infctl -o json diff -f profiles/deepseek-v3-group.yaml        # every object and its action, for scripts

The counts (create, update, delete, unchanged) go to stderr, the diff to stdout.

Exit codes: 0 compared (with --exit-code: no difference), 1 differences with --exit-code, or the API
refused, 2 the profile or a flag is wrong, or no kubeconfig.
"""


def cluster(opts: GlobalOptions) -> KubeClient:
    """The API client for the global options (--kubeconfig, --context, -n)."""
    return connect(ClientSettings(kubeconfig=opts.kubeconfig, context=opts.context, namespace=opts.namespace))


def rendered(
    opts: GlobalOptions, client: KubeClient, profile: DeploymentProfile, options: RenderOptions
) -> tuple[list[dict[str, Any]], str]:
    """A kubernetes profile's objects and their namespace: the profile's, else -n, else the context's."""
    options = render_options(profile, opts.namespace, options, fallback=client.namespace)
    return render(profile, options), options.namespace


@with_render_flags
def diff_cmd(
    ctx: typer.Context,
    files: FilesOption = None,
    overrides: Overrides = None,
    exit_code: Annotated[
        bool, typer.Option("--exit-code", help="Exit 1 when there are differences (like git diff).")
    ] = False,
    *,
    options: RenderOptions,
) -> None:
    """Compare the rendered releases (-f repeatable, a directory or a glob) with the cluster: a server-side
    dry-run apply of every object against
    the live one, plus the objects deploy would prune."""
    opts = global_options(ctx)
    diffs: list[ObjectDiff] = []
    with errors_as_exit():
        paths = required_files(files, command="diff")
        profiles = load_each(paths, lambda f: load_deployment(f, overrides or []))  # before a cluster
        client = cluster(opts)
        for profile in profiles:
            objects, namespace = rendered(opts, client, profile, options)
            diffs += diff_release(client, objects, release=profile.name, namespace=namespace)
    changed = [d for d in diffs if d.action != "unchanged"]
    if opts.output is OutputFormat.table:
        for d in changed:
            sys.stdout.write(d.diff)
        counts = {a: sum(d.action == a for d in diffs) for a in ("create", "update", "delete", "unchanged")}
        err_console.print(", ".join(f"{n} {a}" for a, n in counts.items()), highlight=False)
    else:
        emit(opts, [{"kind": d.kind, "name": d.name, "action": d.action, "diff": d.diff} for d in diffs])
    if exit_code and changed:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("diff", epilog=EXAMPLES)(diff_cmd)


__all__ = ["cluster", "rendered"]
