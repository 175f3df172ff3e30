"""The render flags every Kubernetes-target command takes (``render``, ``diff``, ``deploy``), declared once.

A command decorated with :func:`with_render_flags` takes one ``options: RenderOptions`` instead of the nine
flags; Typer still sees, and ``--help`` still lists, every flag, with :class:`RenderOptions`' defaults.
:func:`render_options` then checks them against the profile and settles the namespace.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import re
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer

from infctl.config import DeploymentProfile
from infctl.errors import ConfigError
from infctl.manifests import RenderOptions

Overrides = Annotated[
    list[str] | None,
    typer.Option("--set", metavar="KEY.PATH=VALUE", help="Override a profile key (repeatable)."),
]

# The RenderOptions fields given on the command line. A backslash keeps Rich from reading "[ns/]" as markup.
_FLAGS: dict[str, Any] = {
    "image": Annotated[str, typer.Option("--image", help="infctl image for the router and autoscaler.")],
    "anti_affinity": Annotated[
        str, typer.Option("--anti-affinity", help="Group mode: keep groups apart, `preferred` or `required`.")
    ],
    "gateway": Annotated[
        str, typer.Option("--gateway", help="Gateway the HTTPRoute attaches to, \\[ns/]name.")
    ],
    "old_backend": Annotated[
        str | None,
        typer.Option("--old-backend", help="System being replaced, \\[ns/]service:port (weighted route)."),
    ],
    "weight": Annotated[
        int | None,
        typer.Option(
            "--weight", help="Percent of traffic to the new system (default 100, 0 with --old-backend)."
        ),
    ],
    "inference_pool_epp": Annotated[
        str | None,
        typer.Option("--inference-pool-epp", help="Route to an InferencePool picked by this EPP Service."),
    ],
    "traffic": Annotated[
        bool, typer.Option("--traffic/--no-traffic", help="Render the HTTPRoute (Gateway API).")
    ],
    "monitoring": Annotated[
        bool,
        typer.Option("--monitoring/--no-monitoring", help="Render monitors, alert rules and dashboards."),
    ],
    "admin_token_secret": Annotated[
        str | None,
        typer.Option(
            "--admin-token-secret",
            metavar="NAME",
            help="Secret (key `token`, the release's namespace) router and autoscaler read the admin token "
            "from, instead of <release>-router-admin. Deploy creates only that default Secret, never a "
            "named one: create it first (kubectl create secret generic NAME --from-literal=token=...).",
        ),
    ],
}
_SECRET_NAME = re.compile(r"(?=.{1,253}$)[a-z0-9]([-a-z0-9.]*[a-z0-9])?")
"""A Kubernetes object name (DNS subdomain), as the API server checks a Secret's."""
_DEFAULTS = {f.name: f.default for f in dataclasses.fields(RenderOptions)}
_PARAMETERS = [
    inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=flag, default=_DEFAULTS[name])
    for name, flag in _FLAGS.items()
]

F = TypeVar("F", bound=Callable[..., None])


def with_render_flags(command: F) -> F:
    """``command`` with its ``options`` parameter replaced, for Typer, by the render flags.

    The command is called with ``options=RenderOptions(...)`` holding the flags as given (namespace at its
    default, ``anti_affinity`` unchecked); pass them through :func:`render_options` before rendering.
    """
    signature = inspect.signature(command, eval_str=True)
    own = [p for p in signature.parameters.values() if p.name != "options"]

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        options = RenderOptions(**{name: kwargs.pop(name) for name in _FLAGS})
        command(*args, options=options, **kwargs)

    wrapper.__signature__ = signature.replace(parameters=[*own, *_PARAMETERS])  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]


def render_options(
    profile: DeploymentProfile, namespace: str | None, options: RenderOptions, *, fallback: str = "default"
) -> RenderOptions:
    """``options`` checked (anti-affinity, Secret name); the namespace is the profile's, else
    ``namespace`` (-n), else ``fallback``."""
    if options.anti_affinity not in ("preferred", "required"):
        raise ConfigError(f"--anti-affinity: expected preferred or required, found {options.anti_affinity!r}")
    secret = options.admin_token_secret
    if secret is not None and not _SECRET_NAME.fullmatch(secret):
        raise ConfigError(
            f"--admin-token-secret: {secret!r} is not a Secret name",
            hint="lowercase letters, digits, '-' and '.', starting and ending with a letter or digit "
            "(at most 253 characters)",
        )
    if namespace and profile.namespace and namespace != profile.namespace:
        raise ConfigError(
            f"-n {namespace} disagrees with the profile's namespace {profile.namespace!r}",
            hint=f"drop -n, or --set namespace={namespace}",
        )
    return dataclasses.replace(options, namespace=profile.namespace or namespace or fallback)
