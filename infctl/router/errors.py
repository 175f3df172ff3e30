"""Errors of the routing core (subclasses of ``infctl.errors.InfctlError``).

::

    InfctlError
    └── NoBackendError     no backend can take the request (reason says which filter emptied the list)
"""

from __future__ import annotations

from infctl.errors import InfctlError


class NoBackendError(InfctlError):
    """Every backend was filtered out by a hard filter (health, role, model)."""

    def __init__(self, message: str, *, reason: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.reason = reason
        """Metric label, e.g. ``no_healthy``, ``no_role``."""
