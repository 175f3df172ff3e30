"""The list of commands. A command module is added here once it works end to end."""

from __future__ import annotations

import typer

from infctl.cli import validate


def register(app: typer.Typer) -> None:
    """Attach every working command to the root app."""
    validate.register(app)
