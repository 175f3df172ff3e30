"""Where local releases live (a per-user XDG state directory, the same from any working directory) and where
their router listens (the profile's ``router.port`` when it sets one)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from infctl.cli.main import app
from infctl.config import DeploymentProfile, load_deployment
from infctl.errors import ConfigError, LocalTargetError
from infctl.local import build_plan
from infctl.local.demo import demo_plan
from infctl.local.paths import default_run_dir, resolve_run_dir, state_home
from infctl.local.state import RunState, write_state

ROOT = Path(__file__).resolve().parents[3]


def local_profile(**router: object) -> DeploymentProfile:
    return DeploymentProfile.model_validate(
        {
            "name": "t",
            "target": "local",
            "mode": "aggregated",
            "replicas": 2,
            "model": {
                "engine": "vllm",
                "model": "m",
                "served_model_name": "m",
                "sim": {"profile": "llama3-8b-h100"},
            },
            "local": {"base_port": 18000},
            "router": {"enabled": True, **router},
        }
    )


def test_the_state_directory_follows_xdg() -> None:
    assert state_home({"HOME": "/home/u"}) == Path("/home/u/.local/state")
    assert state_home({"HOME": "/home/u", "XDG_STATE_HOME": "/xdg"}) == Path("/xdg")
    assert state_home({"HOME": "/home/u", "XDG_STATE_HOME": "relative"}) == Path("/home/u/.local/state")
    assert default_run_dir({"HOME": "/home/u"}) == Path("/home/u/.local/state/infctl/releases")
    assert default_run_dir({"HOME": "/home/u", "INFCTL_RUN_DIR": "/runs"}) == Path("/runs")
    assert resolve_run_dir(Path("/a"), Path("/b")) == Path("/a")
    assert resolve_run_dir(None, Path("/b")) == Path("/b")


@pytest.mark.parametrize("under", [False, True])
def test_a_run_dir_that_is_a_file_is_refused_by_the_source_it_came_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, under: bool
) -> None:
    file = tmp_path / "plain"
    file.write_text("")
    given = file / "runs" if under else file
    with pytest.raises(ConfigError, match=f"^--run-dir {re.escape(str(given))}: .*not a directory"):
        resolve_run_dir(given, tmp_path)
    with pytest.raises(ConfigError, match=f"^run directory {re.escape(str(given))}: ") as err:
        resolve_run_dir(None, given)
    assert "local.run_dir" in (err.value.hint or "")
    monkeypatch.setenv("INFCTL_RUN_DIR", str(given))
    with pytest.raises(ConfigError, match=r"^run directory "):
        resolve_run_dir()
    assert resolve_run_dir(tmp_path / "new" / "deeper") == tmp_path / "new" / "deeper"  # not made yet: fine


def test_a_plan_without_run_dir_uses_the_per_user_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    monkeypatch.delenv("INFCTL_RUN_DIR", raising=False)
    plan = build_plan(load_deployment(ROOT / "profiles" / "local-demo.yaml"), is_free=lambda _: True)
    assert plan.release_dir == tmp_path / "infctl" / "releases" / "local-demo"  # was ./.infctl/local-demo


def test_status_finds_a_release_from_any_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    state = tmp_path / "state"
    write_state(
        state / "infctl" / "releases",
        RunState(release="rel", supervisor_pid=os.getpid(), started_at=0.0, status="running", processes=()),
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.delenv("INFCTL_RUN_DIR", raising=False)
    result = CliRunner().invoke(app, ["status", "rel", "-o", "json"], env={"XDG_STATE_HOME": str(state)})
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["release"] == "rel"


def test_the_profile_router_port_is_the_router_port() -> None:
    demo = build_plan(load_deployment(ROOT / "profiles" / "local-demo.yaml"), is_free=lambda _: True)
    router = next(s for s in demo.specs if s.kind == "router")
    assert router.port == 8000 and demo.entrypoint.url == "http://127.0.0.1:8000"  # was 8104
    plan = build_plan(local_profile(port=18001), is_free=lambda _: True, run_dir=Path("/r"))
    ports = {s.name: s.port for s in plan.specs}
    assert ports == {"engine-0": 18000, "engine-1": 18002, "router": 18001}  # engines step around it
    unset = build_plan(local_profile(), is_free=lambda _: True, run_dir=Path("/r"))
    assert {s.name: s.port for s in unset.specs}["router"] == 18002  # not set: the next free port


def test_a_taken_router_port_is_one_error_with_the_fix() -> None:
    with pytest.raises(LocalTargetError, match=r"router\.port 18001 is taken") as err:
        build_plan(local_profile(port=18001), is_free=lambda p: p != 18001, run_dir=Path("/r"))
    assert err.value.hint is not None and "--set router.port=18002" in err.value.hint
    assert err.value.exit_code == 2  # input to change, as a taken --port on the daemons (docs/cli.md)


def test_the_demo_moves_its_router_when_the_port_is_held() -> None:
    profile = local_profile(port=18001)
    held = demo_plan(profile, Path("/r"), is_free=lambda p: p != 18001)
    assert {s.name: s.port for s in held.specs} == {"engine-0": 18000, "engine-1": 18002, "router": 18003}
    free = demo_plan(profile, Path("/r"), is_free=lambda _: True)
    assert {s.name: s.port for s in free.specs}["router"] == 18001
