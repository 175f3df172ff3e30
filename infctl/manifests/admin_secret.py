"""The router's admin token in a release: which Secret holds it, and how an operator reads it (pure).

The router refuses to start when its file names ``admin_token_env`` and that variable is empty (fail closed,
see :func:`infctl.router.admin_validate.admin_token_from_env`). Rendered router and autoscaler pods load the
variable from a Secret without ``optional: true``, so a missing Secret shows as the pod's
``CreateContainerConfigError`` rather than as an open admin API.

The token itself is never rendered: a random token in GitOps YAML would be a secret in a repository, and a
new one on every render. ``infctl deploy`` creates the Secret when it is missing (never overwriting one,
see :mod:`infctl.kube.secrets`); with GitOps, the operator creates it (:func:`render_note` says how).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from infctl.config.router import ADMIN_TOKEN_ENV as ADMIN_TOKEN_ENV
from infctl.manifests import labels as L

# Re-exported: rendered router (``admin_token_env``) and autoscaler pods read the token from ADMIN_TOKEN_ENV.
TOKEN_KEY = "token"
"""The key of the token in the Secret."""


def default_secret_name(release: str) -> str:
    """``<release>-router-admin``: the Secret ``infctl deploy`` creates when it is missing."""
    return f"{release}-router-admin"


@dataclass(frozen=True)
class AdminSecretRef:
    """Where a rendered release's router reads its admin token."""

    name: str
    namespace: str
    key: str = TOKEN_KEY
    named: bool = False
    """True when the operator named the Secret (``--admin-token-secret``): deploy never creates it."""

    def read_command(self) -> str:
        """The shell command that prints the token."""
        return (
            f"kubectl get secret {self.name} -n {self.namespace} "
            f"-o jsonpath='{{.data.{self.key}}}' | base64 -d"
        )

    def create_command(self) -> str:
        """The shell command that creates the Secret with a random token (what deploy does itself)."""
        return (
            f"kubectl create secret generic {self.name} -n {self.namespace} "
            f"--from-literal={self.key}=\"$(openssl rand -base64 32 | tr -d '\\n')\""
        )


def admin_secret_ref(objects: Iterable[dict[str, Any]]) -> AdminSecretRef | None:
    """The Secret the rendered router Deployment loads ``ADMIN_TOKEN_ENV`` from; None without a router.

    Read back from the rendered objects, so deploy and render follow the template and never a second
    spelling of the name."""
    for obj in objects:
        labels = obj.get("metadata", {}).get("labels", {})
        if obj.get("kind") != "Deployment" or labels.get(L.COMPONENT) != "router":
            continue
        for container in obj["spec"]["template"]["spec"]["containers"]:
            for env in container.get("env", []):
                ref = env.get("valueFrom", {}).get("secretKeyRef")
                if env.get("name") == ADMIN_TOKEN_ENV and ref is not None:
                    namespace, name = obj["metadata"]["namespace"], ref["name"]
                    named = name != default_secret_name(labels.get(L.RELEASE, ""))
                    return AdminSecretRef(name, namespace, ref.get("key", TOKEN_KEY), named)
    return None


def secret_object(ref: AdminSecretRef, labels: dict[str, str], token: str) -> dict[str, Any]:
    """The Secret holding ``token`` (``stringData``: the API server encodes it)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": ref.name, "namespace": ref.namespace, "labels": dict(labels)},
        "type": "Opaque",
        "stringData": {ref.key: token},
    }


def render_note(ref: AdminSecretRef) -> str:
    """YAML comment lines for rendered output: the Secret the router needs, which is not in it."""
    who = (
        "# not rendered here. `infctl deploy` never creates a named Secret; create it before deploying:\n"
        if ref.named
        else "# not rendered here. `infctl deploy` creates it when missing; applying these files yourself,\n"
        "# create it first:\n"
    )
    return (
        f"# The router's admin token comes from Secret {ref.namespace}/{ref.name} (key {ref.key}), which is\n"
        f"{who}#   {ref.create_command()}\n"
        f"# Read it: {ref.read_command()}\n"
    )
