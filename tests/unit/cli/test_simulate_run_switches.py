"""``infctl simulate run``: a flag of a section whose switch is off is refused, not silently ignored."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from infctl.cli.main import app


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--pd-groups", "4", "--pd-mode", "pool"], "--pd-groups, --pd-mode only apply with --pd xPyD"),
        (["--min-engines", "2"], "--min-engines only applies with --autoscale"),
        (["--ttft-slo", "2s", "--startup", "30s"], "--startup, --ttft-slo only apply with --autoscale"),
        (["--admission-deadline", "5s"], "--admission-deadline only applies with --admission-queue N"),
    ],
)
def test_a_flag_whose_switch_is_off_is_refused(flags: list[str], said: str) -> None:
    """`--pd-groups 4` alone ran an aggregated fleet, `--min-engines 2` a fixed one, and said nothing."""
    result = CliRunner().invoke(app, ["simulate", "run", "-n", "5", *flags])
    assert result.exit_code == 2, result.output
    assert said in result.output and "Traceback" not in result.output


def test_with_the_switch_on_the_same_flags_run() -> None:
    args = [
        "simulate",
        "run",
        "-n",
        "5",
        "--engines",
        "2",
        "--autoscale",
        "--min-engines",
        "1",
        "--max-engines",
        "2",
    ]
    assert CliRunner().invoke(app, args).exit_code == 0
    pd = ["simulate", "run", "-n", "5", "--pd", "1P1D", "--pd-groups", "2", "--pd-mode", "pool"]
    assert CliRunner().invoke(app, pd).exit_code == 0
