"""The local admin token: one per release directory, private to the user, given to router and autoscaler."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from infctl.errors import LocalTargetError
from infctl.local import LocalPlan, ProcessSpec, SupervisorSettings
from infctl.local.admin_token import ensure_token, router_token, token_path, with_admin_token
from infctl.local.deploy import prepare
from infctl.local.state import PLAN_FILE

ENV = "INFCTL_ROUTER_ADMIN_TOKEN"


def test_created_once_private_and_reused(tmp_path: Path) -> None:
    path = tmp_path / "rel" / "admin-token"
    tokens = iter(["first", "second"])
    assert ensure_token(path, lambda: next(tokens)) == "first"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert ensure_token(path, lambda: next(tokens)) == "first"


def test_an_empty_file_gets_a_token(tmp_path: Path) -> None:
    path = tmp_path / "admin-token"
    path.write_text("\n")
    path.chmod(0o644)
    assert ensure_token(path, lambda: "fresh") == "fresh"
    assert path.read_text() == "fresh\n" and stat.S_IMODE(path.stat().st_mode) == 0o600


def test_the_generated_token_is_long_and_bearer_safe(tmp_path: Path) -> None:
    token = ensure_token(tmp_path / "t")
    assert len(token) >= 40 and not any(c.isspace() for c in token)


def test_router_and_autoscaler_get_it_engines_do_not(tmp_path: Path) -> None:
    specs = tuple(
        ProcessSpec(name=k, kind=k, argv=("x",), port=p, env={"KEEP": "1"})  # type: ignore[arg-type]
        for k, p in (("engine", 1), ("router", 2), ("autoscaler", 3))
    )
    plan = LocalPlan(release="r", run_dir=tmp_path, model="m", specs=specs)
    assert router_token(plan) is None
    given = with_admin_token(plan, "t0k")
    assert [s.env for s in given.specs] == [
        {"KEEP": "1"},
        {"KEEP": "1", ENV: "t0k"},
        {"KEEP": "1", ENV: "t0k"},
    ]
    assert router_token(given) == "t0k"


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o620])
def test_a_kept_token_other_users_can_reach_is_refused_with_the_fix(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "admin-token"
    path.write_text("old-token\n")
    path.chmod(mode)
    with pytest.raises(LocalTargetError, match=f"mode {mode:04o}") as err:
        ensure_token(path, lambda: "never")
    assert str(path) in err.value.message and err.value.hint is not None
    assert f"chmod 600 {path}" in err.value.hint and "delete it" in err.value.hint
    assert path.read_text() == "old-token\n" and stat.S_IMODE(path.stat().st_mode) == mode  # left as found


@pytest.mark.parametrize("mode", [0o600, 0o400])
def test_a_private_kept_token_is_used(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "admin-token"
    path.write_text("old-token\n")
    path.chmod(mode)
    assert ensure_token(path, lambda: "never") == "old-token"


def test_deploy_refuses_before_starting_anything(tmp_path: Path) -> None:
    router = ProcessSpec(name="router", kind="router", argv=("sh", "-c", "true"), port=2)
    plan = LocalPlan(release="r", run_dir=tmp_path, model="m", specs=(router,))
    path = token_path(plan)
    path.parent.mkdir(parents=True)
    path.write_text("old-token\n")
    path.chmod(0o644)
    with pytest.raises(LocalTargetError, match="open to other users"):
        prepare(plan, SupervisorSettings())
    assert not (plan.release_dir / PLAN_FILE).exists()
    path.chmod(0o600)
    assert prepare(plan, SupervisorSettings()) == plan.release_dir / PLAN_FILE
