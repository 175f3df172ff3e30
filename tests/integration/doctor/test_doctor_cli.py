"""``infctl doctor`` through the real root app: table and JSON output, exit codes, a local release found by
its state and plan files (pointing at engines and a router running in this test's event loop)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner, Result

from infctl.cli.main import _register, app
from infctl.local.procs import start_time
from infctl.local.spec import LocalPlan, ProcessSpec
from infctl.local.state import PLAN_FILE, ProcessState, RunState, write_json_atomic, write_state
from infctl.router.snapshot import Backend


@pytest.fixture(scope="module")
def runner() -> CliRunner:
    if not any(c.name == "doctor" for c in app.registered_commands):
        _register()
    return CliRunner()


async def invoke(runner: CliRunner, *args: str) -> Result:
    """The CLI runs its own event loop, so it runs in a thread while the servers serve from this one."""
    return await asyncio.to_thread(runner.invoke, app, list(args), env={"COLUMNS": "200"})


def test_bad_input_exits_2(runner: CliRunner) -> None:
    assert runner.invoke(app, ["doctor"]).exit_code == 2
    result = runner.invoke(app, ["doctor", "--engine-url", "http://h:1,colour=red"])
    assert result.exit_code == 2 and "colour=red" in result.output


async def test_table_with_a_healthy_and_a_failing_engine_exits_1(runner: CliRunner, start_sim) -> None:
    good = await start_sim(model="m1")
    bad = await start_sim(model="m1", enable_prefix_caching=False)
    result = await invoke(
        runner, "doctor", "--engine-url", good.urls[0], "--engine-url", f"{bad.urls[0]},model=m1"
    )
    assert result.exit_code == 1, result.output
    assert "problems found" in result.output
    assert "prefix caching" in result.output and "--enable-prefix-caching" in result.output
    ok = await invoke(runner, "doctor", "--engine-url", good.urls[0], "-o", "json")
    assert ok.exit_code == 0, ok.output
    data = json.loads(ok.stdout)
    assert data["ok"] and data["counts"]["fail"] == 0
    assert {r["name"] for r in data["results"]} >= {"health", "models", "metrics", "prefix caching"}


async def test_local_release_engines_and_router_are_checked(
    runner: CliRunner, start_sim, start_router, tmp_path: Path
) -> None:
    sims = await start_sim(instances=2, model="m1")
    router = await start_router([Backend(id=u, url=u, engine="vllm") for u in sims.urls])
    async with httpx.AsyncClient() as client:
        await client.post(f"{sims.urls[1]}/admin/faults", json={"specs": ["health=fail"]})
    specs = [
        ProcessSpec(
            name=f"engine-{i}", kind="engine", argv=("sim",), port=int(u.rsplit(":", 1)[1]), role="both"
        )
        for i, u in enumerate(sims.urls)
    ]
    specs.append(
        ProcessSpec(
            name="router",
            kind="router",
            argv=("router", "--engine", "vllm"),
            port=int(router.rsplit(":", 1)[1]),
        )
    )
    plan = LocalPlan(release="rel", run_dir=tmp_path, model="m1", specs=tuple(specs))
    write_json_atomic(tmp_path / "rel" / PLAN_FILE, {"plan": plan.to_dict(), "settings": {}})
    procs = tuple(
        ProcessState(
            name=s.name,
            kind=s.kind,
            role=s.role,
            group=None,
            pool=None,
            port=s.port,
            url=s.url,
            health_url=s.health_url,
            log="x",
            status="healthy",
        )
        for s in specs
    )
    me = os.getpid()
    write_state(
        tmp_path,
        RunState(
            release="rel",
            supervisor_pid=me,
            started_at=0.0,
            status="running",
            processes=procs,
            supervisor_started=start_time(me),
        ),
    )

    async def ejected() -> bool:
        async with httpx.AsyncClient() as client:
            listed = (await client.get(f"{router}/admin/backends")).json()["backends"]
        return any(b["id"] == sims.urls[1] and b["ejected"] for b in listed)

    async with asyncio.timeout(30):  # the router's probes eject the failing engine (late on a loaded machine)
        while not await ejected():
            await asyncio.sleep(0.05)
    result = await invoke(runner, "doctor", "--local", "rel", "--run-dir", str(tmp_path), "-o", "json")
    assert result.exit_code == 1, result.output
    found = [(r["group"], r["name"], r["target"], r["status"]) for r in json.loads(result.stdout)["results"]]
    assert ("local", "release", "release rel", "pass") in found
    assert ("engines", "health", sims.urls[0], "pass") in found
    assert ("engines", "health", sims.urls[1], "fail") in found
    assert ("router", "backends", router, "fail") in found


async def test_the_table_shows_problems_and_a_summary_line_and_all_with_all(
    runner: CliRunner, start_sim
) -> None:
    good = await start_sim(model="m1")
    quiet = await invoke(runner, "doctor", "--engine-url", good.urls[0])
    assert quiet.exit_code == 0, quiet.output
    lines = [line for line in quiet.stdout.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("infctl doctor: healthy (") and "passed" in lines[0]
    assert "--all lists every check" in lines[0]  # before: a row per check (36 for a healthy stack)
    every = await invoke(runner, "doctor", "--engine-url", good.urls[0], "--all")
    assert every.exit_code == 0 and "prefix caching" in every.stdout and "models" in every.stdout
    bad = await start_sim(model="m1", enable_prefix_caching=False)
    problems = await invoke(runner, "doctor", "--engine-url", f"{bad.urls[0]},model=m1")
    assert (
        problems.exit_code == 1
        and "prefix caching" in problems.stdout
        and "problems found" in problems.stdout
    )
    assert "│ health " not in problems.stdout  # the passing checks stay out of the table
