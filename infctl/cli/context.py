"""Global options shared by every command (kubectl style)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import typer


class OutputFormat(StrEnum):
    table = "table"
    json = "json"
    yaml = "yaml"


@dataclass(frozen=True)
class GlobalOptions:
    """Options given before the command name, e.g. ``infctl -o json status``."""

    kubeconfig: Path | None = None
    """Path to a kubeconfig file; None means the client's default lookup."""
    context: str | None = None
    """kubeconfig context to use; None means the current context."""
    namespace: str | None = None
    """Kubernetes namespace; None means the context's namespace (or ``default``)."""
    output: OutputFormat = OutputFormat.table
    """How results are printed: a Rich table for people, JSON or YAML for scripts."""
    verbose: int = 0
    """Log verbosity: 0 warnings, 1 info, 2 debug."""


def global_options(ctx: typer.Context) -> GlobalOptions:
    """The options the root callback stored, or defaults when a command runs standalone (tests)."""
    root = ctx.find_root()
    obj = root.obj
    return obj if isinstance(obj, GlobalOptions) else GlobalOptions()
