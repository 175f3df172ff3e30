"""``infctl render``: a deployment profile as Kubernetes YAML, to stdout or one file per object."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from infctl.cli.context import global_options
from infctl.cli.output import err_console, errors_as_exit
from infctl.config import DeploymentProfile, load_deployment
from infctl.errors import ConfigError
from infctl.manifests import (
    DEFAULT_IMAGE,
    DEFAULT_K8S_VERSION,
    RenderOptions,
    render,
    to_yaml,
    validate_objects,
    write_files,
)
from infctl.manifests.placement import AntiAffinity

EXAMPLES = """
Examples:

  infctl render -f profiles/deepseek-v3-group.yaml                        # multi-document YAML on stdout

  infctl render -f profiles/kimi-k2-pool.yaml -o out/ --validate          # one file per object, checked

  infctl render -f profiles/deepseek-v3-group.yaml --set groups=3 --anti-affinity required

  infctl render -f profiles/qwen3-8b-aggregated.yaml --old-backend legacy/llm-gateway:80 --weight 10

Exit codes: 0 rendered (and valid), 2 the profile or a flag is wrong, or --validate found problems.
"""

Overrides = Annotated[
    list[str] | None,
    typer.Option("--set", metavar="KEY.PATH=VALUE", help="Override a profile key (repeatable)."),
]
Image = Annotated[str, typer.Option("--image", help="infctl image for the router and autoscaler.")]
Anti = Annotated[
    str, typer.Option("--anti-affinity", help="Group mode: keep groups apart, `preferred` or `required`.")
]
Gateway = Annotated[str, typer.Option("--gateway", help="Gateway the HTTPRoute attaches to, [ns/]name.")]
OldBackend = Annotated[
    str | None,
    typer.Option("--old-backend", help="System being replaced, [ns/]service:port (weighted route)."),
]
Weight = Annotated[
    int | None,
    typer.Option(
        "--weight", help="Percent of traffic to the new system (default 100, 0 with --old-backend)."
    ),
]
Epp = Annotated[
    str | None,
    typer.Option("--inference-pool-epp", help="Route to an InferencePool picked by this EPP Service."),
]
Traffic = Annotated[bool, typer.Option("--traffic/--no-traffic", help="Render the HTTPRoute (Gateway API).")]
Monitoring = Annotated[
    bool, typer.Option("--monitoring/--no-monitoring", help="Render monitors, alert rules and dashboards.")
]


def render_options(
    profile: DeploymentProfile,
    namespace: str | None,
    *,
    image: str = DEFAULT_IMAGE,
    anti_affinity: str = "preferred",
    gateway: str = "inference-gateway",
    old_backend: str | None = None,
    weight: int | None = None,
    inference_pool_epp: str | None = None,
    traffic: bool = True,
    monitoring: bool = True,
) -> RenderOptions:
    """Options from flags; the namespace is the profile's, else ``-n``, else ``default``."""
    if anti_affinity not in ("preferred", "required"):
        raise ConfigError(f"--anti-affinity: expected preferred or required, found {anti_affinity!r}")
    if namespace and profile.namespace and namespace != profile.namespace:
        raise ConfigError(
            f"-n {namespace} disagrees with the profile's namespace {profile.namespace!r}",
            hint=f"drop -n, or --set namespace={namespace}",
        )
    anti: AntiAffinity = "required" if anti_affinity == "required" else "preferred"
    return RenderOptions(
        namespace=profile.namespace or namespace or "default",
        image=image,
        anti_affinity=anti,
        gateway=gateway,
        old_backend=old_backend,
        weight=weight,
        inference_pool_epp=inference_pool_epp,
        traffic=traffic,
        monitoring=monitoring,
    )


def render_cmd(
    ctx: typer.Context,
    file: Annotated[Path, typer.Option("-f", "--file", help="Deployment profile (target kubernetes).")],
    output_dir: Annotated[
        Path | None,
        typer.Option("-o", "--output-dir", help="Write one file per object here instead of stdout."),
    ] = None,
    overrides: Overrides = None,
    validate: Annotated[
        bool, typer.Option("--validate", help="Check every object against its schema.")
    ] = False,
    k8s_version: Annotated[
        str, typer.Option("--k8s-version", help="Kubernetes version whose schemas --validate uses.")
    ] = DEFAULT_K8S_VERSION,
    image: Image = DEFAULT_IMAGE,
    anti_affinity: Anti = "preferred",
    gateway: Gateway = "inference-gateway",
    old_backend: OldBackend = None,
    weight: Weight = None,
    inference_pool_epp: Epp = None,
    traffic: Traffic = True,
    monitoring: Monitoring = True,
) -> None:
    """Render a deployment profile into Kubernetes objects: engine workloads placed by group or pool, the
    router and autoscaler, the HTTPRoute, monitors, alert rules and dashboards, in apply order."""
    opts = global_options(ctx)
    with errors_as_exit():
        profile = load_deployment(file, overrides or [])
        options = render_options(
            profile, opts.namespace, image=image, anti_affinity=anti_affinity, gateway=gateway,
            old_backend=old_backend, weight=weight, inference_pool_epp=inference_pool_epp,
            traffic=traffic, monitoring=monitoring,
        )  # fmt: skip
        objects = render(profile, options)
        if validate:
            check(objects, k8s_version)
    if output_dir is None:
        sys.stdout.write(to_yaml(objects))
        return
    paths = write_files(objects, output_dir)
    err_console.print(f"wrote {len(paths)} objects to {output_dir}", highlight=False)


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
