"""The local target end to end over simulated engines: deploy, self-heal, stop, and the CLI round trip."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from localkit import fixed_ports
from typer.testing import CliRunner, Result

from infctl.cli.main import _register, app
from infctl.config import load_deployment
from infctl.local import RunState, SupervisorSettings, build_plan, port_is_free, read_state, serve
from infctl.local.procs import group_alive

PROFILE = """\
name: {name}
target: local
mode: aggregated
replicas: 2
model:
  engine: vllm
  model: meta-llama/Llama-3.1-8B-Instruct
  served_model_name: llama3-8b
  sim:
    profile: llama3-8b-h100
    num_gpu_blocks: 256
    speedup: 100
local:
  base_port: {port}
  run_dir: {run_dir}
  simulate: true
"""

# Deadlines, not durations: an engine's `python -m infctl sim` took 12-15 s to answer on a loaded machine
# (~1 s idle), so the health and readiness waits are generous; they end as soon as the condition holds.
FAST = SupervisorSettings(health_timeout=90, health_interval=0.05, grace_period=3, backoff_initial=0.1)


def write_profile(tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.yaml"
    base_port = fixed_ports(24000)
    path.write_text(PROFILE.format(name=name, port=base_port, run_dir=tmp_path / "run"))
    return path


async def healthy(url: str) -> bool:
    async with httpx.AsyncClient(trust_env=False) as client:
        try:
            return (await client.get(url, timeout=2)).status_code == 200
        except httpx.HTTPError:
            return False


async def test_a_killed_engine_is_restarted_and_everything_stops_cleanly(tmp_path: Path) -> None:
    plan = build_plan(load_deployment(write_profile(tmp_path, "heal")), is_free=port_is_free)
    states: list[RunState] = []
    ready, stop = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(serve(plan, FAST, ready=ready, stop=stop, on_change=states.append))
    try:
        await asyncio.wait_for(ready.wait(), 120)
        assert [s.kind for s in plan.specs] == ["engine", "engine", "router"]
        assert [await healthy(s.health_url) for s in plan.specs] == [True, True, True]
        victim = states[-1].process("engine-1")
        assert victim.pid is not None
        os.kill(victim.pid, signal.SIGKILL)

        async def restarted() -> RunState:
            while True:
                p = states[-1].process("engine-1")
                if p.restarts == 1 and p.status == "healthy":
                    return states[-1]
                await asyncio.sleep(0.05)

        after = await asyncio.wait_for(restarted(), 120)
        healed = after.process("engine-1")
        assert healed.pid != victim.pid
        assert healed.last_exit == -signal.SIGKILL
        assert after.process("engine-0").restarts == 0
        assert await healthy(plan.specs[1].health_url)
        async with httpx.AsyncClient(trust_env=False) as client:
            body = {"model": "llama3-8b", "prompt": "hello there", "max_tokens": 2}
            r = await client.post(f"{plan.entrypoint.url}/v1/completions", json=body, timeout=10)
            assert r.status_code == 200
    finally:
        stop.set()
        final = await asyncio.wait_for(task, 30)
    assert final.status == "stopped"
    pids = {p.pid for s in states for p in s.processes if p.pid is not None}
    assert len(pids) == 4  # two engines, the router, the restarted engine
    assert not [pid for pid in pids if group_alive(pid)]
    assert not _children()


def _children() -> list[int]:
    """Live (non-zombie) children of this test process."""
    me = str(os.getpid())
    found = []
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[-1].split()
        except (OSError, ValueError):
            continue
        if fields[1] == me and fields[0] != "Z":
            found.append(int(entry.name))
    return found


@pytest.fixture(scope="module")
def infctl() -> Callable[..., Result]:
    """Run the real root app in this process (the detached supervisor still is a process of its own)."""
    if not any(c.name == "deploy" for c in app.registered_commands):
        _register()
    runner = CliRunner()
    return lambda *args: runner.invoke(app, list(args))


def test_deploy_detach_status_delete_round_trip(tmp_path: Path, infctl: Callable[..., Result]) -> None:
    profile = write_profile(tmp_path, "roundtrip")
    deployed = infctl("-o", "json", "deploy", "-f", str(profile), "--detach")
    assert deployed.exit_code == 0, deployed.output
    summary = json.loads(deployed.stdout)
    try:
        assert summary["status"] == "running"
        assert [p["name"] for p in summary["processes"]] == ["engine-0", "engine-1", "router"]
        token_file = Path(summary["admin_token"]["file"])
        assert token_file == tmp_path / "run" / "roundtrip" / "admin-token" and token_file.read_text().strip()
        assert summary["admin_token"]["read"] == f"cat {token_file}"

        again = infctl("deploy", "-f", str(profile), "--detach")
        assert again.exit_code == 1
        assert "already running" in again.stderr

        shown = infctl("-o", "json", "status", "--release", "roundtrip", "--run-dir", str(tmp_path / "run"))
        assert shown.exit_code == 0, shown.output
        report = json.loads(shown.stdout)
        assert report["status"] == "running"
        assert [(p["status"], p["healthy"], p["restarts"]) for p in report["processes"]] == [
            ("healthy", True, 0),
            ("healthy", True, 0),
            ("healthy", True, 0),
        ]
        pids = [p["pid"] for p in report["processes"]] + [report["supervisor_pid"]]
    finally:
        deleted = infctl("-o", "json", "delete", "-f", str(profile))
    assert deleted.exit_code == 0, deleted.output
    assert json.loads(deleted.stdout)["deleted"] is True
    assert not [pid for pid in pids if group_alive(pid)]

    nothing = infctl("delete", "-f", str(profile))
    assert nothing.exit_code == 0
    assert "nothing to delete" in nothing.stdout
    gone = infctl("status", "-f", str(profile))
    assert gone.exit_code == 1
    assert "no local release 'roundtrip'" in gone.stderr


def test_kubernetes_target_needs_a_cluster_profile(tmp_path: Path, infctl: Callable[..., Result]) -> None:
    result = infctl("deploy", "--target", "kubernetes", "-f", str(write_profile(tmp_path, "k")))
    assert result.exit_code == 2
    assert "expected a cluster profile for target 'kubernetes'" in result.output
    assert "target: local" in result.output


def test_demo_as_json(tmp_path: Path, infctl: Callable[..., Result]) -> None:
    run_dir = str(tmp_path / "run")
    # The demo's own profile has length pools (their replicas per pool); two plain engines keep this quick.
    demo = str(Path(__file__).parents[2] / "profiles" / "local-demo.yaml")
    result = infctl("-o", "json", "demo", "-f", demo, "--quick", "--set", "replicas=2", "--run-dir", run_dir)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["processes"] == 3  # two engines and the router
    assert data["first"]["reply"] and data["first"]["completion_tokens"] > 0
    # Measured, and within its own request (a bound in seconds would be the machine's load, not the demo's).
    assert 0 < data["first"]["ttft_s"] <= data["first"]["total_s"]
    assert data["first"]["cached_tokens"] == 0
    assert data["repeated_prefix"]["cached_tokens"] >= 16
    assert not list((tmp_path / "run").glob("*/state.json"))


def test_ctrl_c_stops_a_foreground_deploy_and_its_engines(tmp_path: Path) -> None:
    profile = write_profile(tmp_path, "fg")
    proc = subprocess.Popen(
        [sys.executable, "-m", "infctl", "deploy", "-f", str(profile)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        state = _wait_for_state(tmp_path / "run", "fg", "running", timeout=180)  # the deploy's own default
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "stopped local release fg" in out
    assert not [p.pid for p in state.processes if p.pid is not None and group_alive(p.pid)]


def _wait_for_state(run_dir: Path, release: str, status: str, timeout: float) -> RunState:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = read_state(run_dir, release)
        if state is not None and state.status == status:
            return state
        time.sleep(0.05)
    raise AssertionError(f"{release} never reached {status}")
