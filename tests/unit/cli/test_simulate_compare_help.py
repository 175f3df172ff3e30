"""``simulate compare --help`` lists every scenario it can run (scale-to-zero was missing)."""

from __future__ import annotations

import re

from infctl.cli.simulate_compare import EPILOG
from infctl.sim.cluster.scenarios import GROUPS, SCENARIOS


def test_the_help_lists_every_scenario() -> None:
    listed = set(re.findall(r"\[bold\]([a-z-]+)\[/\]", EPILOG))
    grouped = {member for members in GROUPS.values() for member in members}
    assert set(SCENARIOS) - grouped - listed == set()
    assert set(GROUPS) <= listed
