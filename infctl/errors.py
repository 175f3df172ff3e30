"""Errors raised by infctl's core. Only ``infctl.cli`` turns them into output and exit codes.

Exception tree::

    InfctlError                    base; ``hint`` says what to do about it
    ├── ConfigError                a profile or flag is wrong (file:line and key path in the message)
    ├── EngineError                an engine answered badly or not at all
    │   └── MetricsError           /metrics could not be read or parsed
    ├── LocalTargetError           the local supervisor could not start, find or stop something
    └── KubeError                  the Kubernetes API refused a request (status and message kept)

Every error carries a one-line ``hint``: the fix an operator should try first.
"""

from __future__ import annotations


class InfctlError(Exception):
    """Base of every error infctl raises on purpose."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class ConfigError(InfctlError):
    """A profile, configuration file or command-line value is invalid."""

    exit_code = 2


class EngineError(InfctlError):
    """An engine endpoint failed or answered with something unexpected."""


class MetricsError(EngineError):
    """An engine's /metrics endpoint was unreachable or unparseable."""


class LocalTargetError(InfctlError):
    """The local target (supervised processes on this machine) failed."""


class PortTakenError(LocalTargetError):
    """A port the profile names is taken on this machine: input to change, so exit 2 like a bad flag."""

    exit_code = 2


class KubeError(InfctlError):
    """The Kubernetes API server refused or failed a request."""

    def __init__(self, message: str, *, status: int | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.status = status
