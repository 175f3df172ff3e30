"""The router's admin-token Secret at deploy time: created when missing, never overwritten, never rendered.

What to do is decided by :func:`secret_action` (pure); :func:`ensure_admin_secret` reads the cluster and
creates the Secret with a fresh ``secrets.token_urlsafe`` token when the decision says so. An existing
Secret is kept as it is (its token may be in use by cutover scripts or an autoscaler), so redeploying never
rotates the token; deleting the Secret and deploying again does. ``infctl delete`` leaves it in place.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from infctl.errors import KubeError
from infctl.kube.apply import DryRun, get_or_none
from infctl.kube.client import JSON, KubeClient
from infctl.manifests import labels as L
from infctl.manifests.admin_secret import AdminSecretRef, default_secret_name, secret_object

TOKEN_BYTES = 32
"""Random bytes in a generated token (``secrets.token_urlsafe``: 43 URL-safe characters)."""

Action = Literal["created", "kept", "would create"]


@dataclass(frozen=True)
class AdminSecret:
    """What deploy did about the admin-token Secret, and how the operator reads the token."""

    ref: AdminSecretRef
    action: Action

    @property
    def read_command(self) -> str:
        return self.ref.read_command()


def secret_action(live: dict[str, Any] | None, ref: AdminSecretRef, release: str, dry_run: DryRun) -> Action:
    """``kept`` for a usable Secret, ``created``/``would create`` for a missing default one; KubeError
    when a Secret deploy may not create (one the operator named) is missing, or lacks the token key."""
    if live is not None:
        data = {**live.get("data", {}), **live.get("stringData", {})}
        if not data.get(ref.key):
            raise KubeError(
                f"Secret {ref.namespace}/{ref.name} has no {ref.key!r} key: the router could not start",
                hint=f"add the key (the admin token), or delete the Secret and deploy again: "
                f"kubectl delete secret {ref.name} -n {ref.namespace}",
            )
        return "kept"
    if ref.name != default_secret_name(release):
        raise KubeError(
            f"Secret {ref.namespace}/{ref.name}, named for the router's admin token, does not exist",
            hint=f"create it: {ref.create_command()}",
            status=404,
        )
    return "created" if dry_run == "none" else "would create"


def ensure_admin_secret(
    client: KubeClient,
    ref: AdminSecretRef,
    *,
    release: str,
    dry_run: DryRun = "none",
    new_token: Callable[[], str] = lambda: secrets.token_urlsafe(TOKEN_BYTES),
) -> AdminSecret:
    """Make sure ``ref`` holds a token; create it (release-labelled, ``new_token()``) only when missing."""
    path = f"/api/v1/namespaces/{ref.namespace}/secrets"
    action = secret_action(get_or_none(client, f"{path}/{ref.name}"), ref, release, dry_run)
    if action == "kept" or dry_run == "client":
        return AdminSecret(ref, action)
    body = secret_object(ref, L.release_labels(release, "router", "infctl-router"), new_token())
    query = {"fieldManager": L.MANAGER, **({"dryRun": "All"} if dry_run == "server" else {})}
    try:
        client.request("POST", path, query=query, body=body, content_type=JSON)
    except KubeError as err:
        if err.status != 409:
            raise
        # Created meanwhile (another deploy): keep theirs, as with any existing Secret.
        return AdminSecret(ref, "kept")
    return AdminSecret(ref, action)
