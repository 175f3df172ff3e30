"""``infctl render``: a deployment profile as Kubernetes YAML, to stdout or one file per object."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from infctl.cli.context import OutputFormat, global_options
from infctl.cli.files import FilesOption, check_writable, load_each, required_files
from infctl.cli.output import err_console, errors_as_exit
from infctl.cli.render_flags import Overrides, render_options, with_render_flags
from infctl.config import load_deployment
from infctl.errors import ConfigError
from infctl.manifests import DEFAULT_K8S_VERSION, RenderOptions, validate_objects
from infctl.manifests.admin_secret import admin_secret_ref, render_note

# From the submodule: once it is imported, the package's attribute `render` is the module, not the function.
from infctl.manifests.render import remove_stale, render, to_yaml, write_files

EXAMPLES = """
Examples:

  infctl render -f profiles/deepseek-v3-group.yaml                        # multi-document YAML on stdout

  infctl render -f profiles/kimi-k2-pool.yaml -d out/ --validate          # one file per object, checked

  infctl render -f profiles/qwen3-8b-aggregated.yaml -o json              # a JSON list instead of YAML

  infctl render -f profiles/deepseek-v3-group.yaml --set groups=3 --anti-affinity required

  infctl render -f profiles/qwen3-8b-aggregated.yaml --old-backend legacy/llm-gateway:80 --weight 10

The router's admin token is not rendered (no secret in Git): `infctl deploy` creates its Secret
<release>-router-admin when missing; applying the output yourself, create it first (the output's
opening comment says how).

Exit codes: 0 rendered (and valid), 2 the profile or a flag is wrong, or --validate found problems.
"""


@with_render_flags
def render_cmd(
    ctx: typer.Context,
    files: FilesOption = None,
    output_dir: Annotated[
        Path | None,
        typer.Option(
            "-d",
            "--output-dir",
            help="Write one file per object here instead of stdout; files an earlier render of the same "
            "release left there and this one does not write are removed.",
        ),
    ] = None,
    overrides: Overrides = None,
    validate: Annotated[
        bool, typer.Option("--validate", help="Check every object against its schema.")
    ] = False,
    k8s_version: Annotated[
        str, typer.Option("--k8s-version", help="Kubernetes version whose schemas --validate uses.")
    ] = DEFAULT_K8S_VERSION,
    *,
    options: RenderOptions,
) -> None:
    """Render deployment profiles (-f repeatable, a directory or a glob) into Kubernetes objects: engine
    workloads placed by group or pool, the router and autoscaler, the HTTPRoute, monitors, alert rules and
    dashboards, in apply order."""
    opts = global_options(ctx)
    objects: list[dict[str, Any]] = []
    with errors_as_exit():
        check_writable("-d", output_dir, directory=True)
        paths = required_files(files, command="render")
        for profile in load_each(paths, lambda f: load_deployment(f, overrides or [])):
            objects += render(profile, render_options(profile, opts.namespace, options))
        if validate:
            check(objects, k8s_version)
    ref = admin_secret_ref(objects)
    note = render_note(ref) if ref is not None else ""
    if output_dir is None and opts.output is OutputFormat.json:
        sys.stdout.write(json.dumps(objects, indent=2) + "\n")
        if note:
            err_console.print(note.rstrip("\n"), highlight=False, markup=False, soft_wrap=True)
        return
    if output_dir is None:
        sys.stdout.write(note + to_yaml(objects))
        return
    paths = write_files(objects, output_dir)
    stale = remove_stale(objects, output_dir)
    err_console.print(f"wrote {len(paths)} objects to {output_dir}", highlight=False)
    if stale:
        names = ", ".join(p.name for p in stale[:6]) + (
            f" and {len(stale) - 6} more" if len(stale) > 6 else ""
        )
        err_console.print(
            f"removed {len(stale)} files an earlier render of the same release left there (objects no longer "
            f"rendered, or renumbered): {names}",
            highlight=False,
            soft_wrap=True,
        )
    if note:
        err_console.print(note.rstrip("\n"), highlight=False, markup=False, soft_wrap=True)


def check(objects: list[dict[str, Any]], k8s_version: str) -> None:
    """ConfigError listing every schema problem (exit code 2)."""
    problems = validate_objects(objects, k8s_version)
    if problems:
        raise ConfigError(
            f"{len(problems)} schema problem(s) against Kubernetes {k8s_version}:\n  "
            + "\n  ".join(problems),
            hint="fix the template or profile value named above",
        )
    err_console.print(f"{len(objects)} objects valid against Kubernetes {k8s_version}", highlight=False)


def register(app: typer.Typer) -> None:
    app.command("render", epilog=EXAMPLES)(render_cmd)
