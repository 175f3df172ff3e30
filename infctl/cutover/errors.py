"""Errors of the cutover package (subclasses of ``infctl.errors.InfctlError``).

InfctlError
├── ConfigError                a plan, gate or duration cannot be read (exit 2)
└── CutoverError               the traffic object cannot be read or written as asked (exit 1)
    └── StaleStateError        someone changed the split since it was read: nothing was written (exit 4)
"""

from __future__ import annotations

from infctl.errors import InfctlError


class CutoverError(InfctlError):
    """The traffic object (HTTPRoute or router) refused or failed a cutover read or write."""


class StaleStateError(CutoverError):
    """Optimistic concurrency: the object changed between our read and our write. Never retried blindly."""

    exit_code = 4
