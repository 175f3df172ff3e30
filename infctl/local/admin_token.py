"""The admin token of a local release's router: generated once, kept in the release directory (mode 0600).

A local router listens on 127.0.0.1, which is not private on a shared machine (any local user, and any web
page the operator opens, can reach it), so it gets a token like a cluster router: :func:`ensure_token`
creates ``<run_dir>/<release>/admin-token`` with a ``secrets.token_urlsafe`` token unless it exists (an
existing one must still be mode 0600 or stricter: :func:`check_private`; ``deploy`` checks that before it
starts anything), and :func:`with_admin_token` puts it in the router's and the autoscaler's environment
(not in plan.json, which is world-readable). ``infctl delete`` removes it with the rest of the release
directory: the next deploy of the release gets a new token.
Read it with ``export INFCTL_ROUTER_ADMIN_TOKEN=$(cat <run_dir>/<release>/admin-token)``.
"""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from infctl.errors import LocalTargetError
from infctl.local.spec import LocalPlan
from infctl.router.admin_validate import DEFAULT_TOKEN_ENV

TOKEN_FILE = "admin-token"
TOKEN_BYTES = 32
"""Random bytes in a generated token (43 URL-safe characters)."""


def token_path(plan: LocalPlan) -> Path:
    return plan.release_dir / TOKEN_FILE


def _new_token() -> str:
    return secrets.token_urlsafe(TOKEN_BYTES)


def ensure_token(path: Path, new_token: Callable[[], str] = _new_token) -> str:
    """The token in ``path``; a new one, written readable by this user only, when the file is missing
    or empty. An existing token must be private too (:func:`check_private`)."""
    try:
        token = path.read_text().strip()
    except FileNotFoundError:
        token = ""
    if token:
        check_private(path)
        return token
    token = new_token()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(token + "\n")
    path.chmod(0o600)  # O_CREAT's mode does not apply to a file that existed (empty)
    return token


def check_private(path: Path) -> None:
    """Refuse a token file that other users can read or write (as ssh refuses a private key): a token
    others may have read no longer proves who calls the admin API, and fixing the mode quietly would hide
    that. Raises ``LocalTargetError`` naming the file, its mode and both ways out. A missing file passes."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return
    if mode & 0o077:
        raise LocalTargetError(
            f"the admin token file {path} is open to other users (mode {mode:04o}); refusing to use it",
            hint=f"keep it with `chmod 600 {path}`, or delete it for a new token on the next deploy "
            "(do that if anyone else may have read it)",
        )


def with_admin_token(plan: LocalPlan, token: str) -> LocalPlan:
    """``plan`` with ``token`` in the environment of its router (which requires it) and autoscaler (which
    reads the router's ``/admin/backends``)."""
    specs = tuple(
        replace(s, env={**s.env, DEFAULT_TOKEN_ENV: token}) if s.kind in ("router", "autoscaler") else s
        for s in plan.specs
    )
    return replace(plan, specs=specs)


def router_token(plan: LocalPlan) -> str | None:
    """The token the plan's router was given, None without a router (or before :func:`with_admin_token`)."""
    return next((s.env.get(DEFAULT_TOKEN_ENV) for s in plan.specs if s.kind == "router"), None)
