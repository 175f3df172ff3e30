"""What the cutover integration tests import by name (a unique module name: ``from conftest import`` takes
whichever conftest pytest loaded last): the CLI app with every command, and the stack ``cutover_stack``
(conftest.py) yields."""

from __future__ import annotations

from dataclasses import dataclass

import typer

from infctl.cli.main import _register, app
from infctl.sim.server import SimCluster


def cli_app() -> typer.Typer:
    """The root app with every command registered (once per process, whichever test gets there first)."""
    if not any(g.name == "cutover" for g in app.registered_groups):
        _register()
    return app


@dataclass
class Stack:
    url: str
    """The router."""
    old: SimCluster
    new: SimCluster
