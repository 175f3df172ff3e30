"""``infctl diff``: what ``infctl deploy`` would change in the cluster, as a unified diff per object.

Also home of the helpers every Kubernetes-target command shares: the cluster client built from the global
options, and rendering a profile with the render flags.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from infctl.cli.context import GlobalOptions, OutputFormat, global_options
from infctl.cli.output import emit, err_console, errors_as_exit
from infctl.cli.render import (
    Anti,
    Epp,
    Gateway,
    Image,
    Monitoring,
    OldBackend,
    Overrides,
    Traffic,
    Weight,
    render_options,
)
from infctl.config import DeploymentProfile, load_deployment
from infctl.kube import ClientSettings, KubeClient, connect, diff_release
from infctl.manifests import DEFAULT_IMAGE, render


def cluster(opts: GlobalOptions) -> KubeClient:
    """The API client for the global options (--kubeconfig, --context, -n)."""
    return connect(ClientSettings(kubeconfig=opts.kubeconfig, context=opts.context, namespace=opts.namespace))


def rendered(
    opts: GlobalOptions, client: KubeClient, file: Path, overrides: list[str], flags: dict[str, Any]
) -> tuple[DeploymentProfile, list[dict[str, Any]], str]:
    """Load and render a kubernetes profile; its namespace is the profile's, else -n, else the context's."""
    profile = load_deployment(file, overrides)
    options = render_options(profile, opts.namespace, **flags)
    if profile.namespace is None and opts.namespace is None:
        options = dataclasses.replace(options, namespace=client.namespace)
    return profile, render(profile, options), options.namespace


def diff_cmd(
    ctx: typer.Context,
    file: Annotated[Path, typer.Option("-f", "--file", help="Deployment profile (target kubernetes).")],
    overrides: Overrides = None,
    image: Image = DEFAULT_IMAGE,
    anti_affinity: Anti = "preferred",
    gateway: Gateway = "inference-gateway",
    old_backend: OldBackend = None,
    weight: Weight = None,
    inference_pool_epp: Epp = None,
    traffic: Traffic = True,
    monitoring: Monitoring = True,
    exit_code: Annotated[
        bool, typer.Option("--exit-code", help="Exit 1 when there are differences (like git diff).")
    ] = False,
) -> None:
    """Compare the rendered release with the cluster: a server-side dry-run apply of every object against
    the live one, plus the objects deploy would prune."""
    opts = global_options(ctx)
    with errors_as_exit():
        client = cluster(opts)
        flags = dict(
            image=image,
            anti_affinity=anti_affinity,
            gateway=gateway,
            old_backend=old_backend,
            weight=weight,
            inference_pool_epp=inference_pool_epp,
            traffic=traffic,
            monitoring=monitoring,
        )
        profile, objects, namespace = rendered(opts, client, file, overrides or [], flags)
        diffs = diff_release(client, objects, release=profile.name, namespace=namespace)
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
    app.command("diff")(diff_cmd)


__all__ = ["cluster", "rendered"]
