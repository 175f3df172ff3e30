"""``infctl autoscaler`` through the real root app: a mistake is one red line with a fix, and an exit code."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from infctl.autoscaler.snapshot import Decision, Recommendation, ScalerState
from infctl.cli.autoscaler import _emit
from infctl.cli.context import OutputFormat
from infctl.cli.main import _register, app
from infctl.local.state import RunState, RunStatus, write_state

PROFILES = Path(__file__).parents[3] / "profiles"


@pytest.fixture(scope="module")
def cli() -> CliRunner:
    if not any(c.name == "autoscaler" for c in app.registered_commands):
        _register()
    return CliRunner()


def test_without_a_file_it_says_what_to_pass(cli: CliRunner) -> None:
    result = cli.invoke(app, ["autoscaler"])
    assert result.exit_code == 2
    assert "no deployment given" in result.output and "-f PROFILE" in result.output


def test_a_local_release_that_is_not_running(cli: CliRunner, tmp_path: Path) -> None:
    profile = PROFILES / "local-demo.yaml"
    result = cli.invoke(app, ["autoscaler", "-f", str(profile), "--run-dir", str(tmp_path)])
    assert result.exit_code == 1
    assert f"no local release 'local-demo' in {tmp_path}" in result.output
    assert "--set autoscaler.enabled=true" in result.output


@pytest.mark.parametrize(
    ("status", "control", "said"),
    [
        ("stopped", "http://127.0.0.1:9", "is stopped, not running"),
        # local profiles ship with the autoscaler off: the release runs, but nothing can scale it
        ("running", None, "runs without runtime scaling (deployed with its autoscaler off)"),
    ],
)
def test_a_local_release_says_which_of_its_states_stops_the_autoscaler(
    cli: CliRunner, tmp_path: Path, status: RunStatus, control: str | None, said: str
) -> None:
    """All three used to read "not running with runtime scaling", even for a release that was running."""
    state = RunState(release="local-demo", supervisor_pid=1, started_at=0.0, status=status, processes=(),
                     control_url=control)  # fmt: skip
    write_state(tmp_path, state)
    profile = PROFILES / "local-demo.yaml"
    result = cli.invoke(app, ["autoscaler", "-f", str(profile), "--run-dir", str(tmp_path)])
    assert result.exit_code == 1 and "'local-demo'" in result.output and said in result.output


def test_a_kubernetes_profile_asks_for_the_rendered_file(cli: CliRunner) -> None:
    result = cli.invoke(app, ["autoscaler", "-f", str(PROFILES / "qwen3-8b-aggregated.yaml")])
    assert result.exit_code == 2 and "rendered autoscaler.yaml" in result.output


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--schedule", "22:00 min=2"], "expected 'HH:MM-HH:MM min=N"),
        (["--ratio", "a:b"], "expected LOW:HIGH"),
        (["--time-scale", "0"], "--time-scale must be > 0"),
    ],
)
def test_bad_flags(cli: CliRunner, tmp_path: Path, flags: list[str], message: str) -> None:
    result = cli.invoke(app, ["autoscaler", "-f", str(PROFILES / "local-demo.yaml"), *flags])
    assert result.exit_code == 2 and message in result.output


def test_the_help_deploys_the_local_release_it_then_watches_with_its_autoscaler_on() -> None:
    """The example used to run against local-demo as shipped (autoscaler off): it could only fail."""
    from infctl.cli.autoscaler import EXAMPLES
    from infctl.config import load_deployment

    local = EXAMPLES.split("# In a cluster")[0]
    deploy, watch = local.split("infctl autoscaler ")
    assert "infctl deploy -f profiles/local-demo.yaml" in deploy and "-f profiles/local-demo.yaml" in watch
    profile = load_deployment(PROFILES / "local-demo.yaml", re.findall(r"--set (\S+=\S*)", deploy))
    assert profile.autoscaler.enabled and profile.autoscaler.both is not None
    assert re.findall(r"--set (\S+=\S*)", deploy) == re.findall(r"--set (\S+=\S*)", watch)


def test_decisions_print_as_json_lines_or_yaml_documents(capsys: pytest.CaptureFixture[str]) -> None:
    recs = (
        Recommendation("prefill", 2, 3, "queue high", (("ready", 2.0), ("ttft_p99_s", float("nan")))),
        Recommendation("decode", 4, 4, "within thresholds", (("ready", 4.0),)),
    )
    decision = Decision(recs, ScalerState())
    _emit(decision, every=False, fmt=OutputFormat.json)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1  # only what changed, as the table prints
    row = json.loads(lines[0])
    assert (row["unit"], row["current"], row["desired"], row["changed"]) == ("prefill", 2, 3, True)
    assert row["inputs"] == {"ready": 2.0, "ttft_p99_s": None}  # NaN is not JSON
    _emit(decision, every=True, fmt=OutputFormat.yaml)
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    assert [d["unit"] for d in docs] == ["prefill", "decode"]
