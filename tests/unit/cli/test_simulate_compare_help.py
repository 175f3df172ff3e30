"""``simulate compare --help`` lists every scenario it can run (scale-to-zero was missing)."""

from __future__ import annotations

import re

from typer.testing import CliRunner

from infctl.cli.main import _register, app
from infctl.cli.simulate_compare import EPILOG
from infctl.sim.cluster.scenarios import GROUPS, SCENARIOS


def test_the_help_lists_every_scenario() -> None:
    listed = set(re.findall(r"\[bold\]([a-z-]+)\[/\]", EPILOG))
    grouped = {member for members in GROUPS.values() for member in members}
    assert set(SCENARIOS) - grouped - listed == set()
    assert set(GROUPS) <= listed


def test_lead_in_is_checked_before_anything_runs() -> None:
    if not any(c.name == "autoscaler" for c in app.registered_commands):
        _register()
    result = CliRunner().invoke(app, ["simulate", "compare", "autoscaling", "--lead-in", "13"])
    assert result.exit_code == 2 and "--lead-in" in result.output
