"""The list of commands. A command module is added here once it works end to end."""

from __future__ import annotations

import typer

from infctl.cli import bench, delete, demo, deploy, diff, doctor, render, router, sim, status, validate


def register(app: typer.Typer) -> None:
    """Attach every working command to the root app."""
    from infctl.cli import autoscaler as autoscaler_cli
    from infctl.cli import cutover as cutover_cli
    from infctl.cli import simulate as simulate_cli

    validate.register(app)
    deploy.register(app)
    status.register(app)
    delete.register(app)
    demo.register(app)
    sim.register(app)
    router.register(app)
    render.register(app)
    diff.register(app)
    bench.register(app)
    doctor.register(app)
    autoscaler_cli.register(app)
    cutover_cli.register(app)
    simulate_cli.register(app)
