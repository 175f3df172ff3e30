"""The supervisor against real processes: a stand-in HTTP server (``python -m http.server``) per spec."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import sys
from pathlib import Path

import pytest

from infctl.errors import LocalTargetError
from infctl.local import (
    LocalPlan,
    PortAllocator,
    ProcessSpec,
    RunState,
    SupervisorSettings,
    port_is_free,
    serve,
)
from infctl.local.procs import group_alive, pid_alive
from infctl.local.state import read_state

# A generous health deadline: a python http.server can take seconds to answer on a loaded machine.
FAST = SupervisorSettings(health_timeout=60, health_interval=0.05, grace_period=2, backoff_initial=0.05)


def http_server(name: str, port: int, kind: str = "engine") -> ProcessSpec:
    argv = (sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1")
    return ProcessSpec(name=name, kind=kind, argv=argv, port=port, health_path="/")  # type: ignore[arg-type]


def plan_of(tmp_path: Path, *specs: ProcessSpec) -> LocalPlan:
    return LocalPlan(release="sup", run_dir=tmp_path, model="m", specs=specs)


@pytest.fixture
def ports() -> PortAllocator:
    return PortAllocator(21000 + os.getpid() % 5000, port_is_free)


async def test_stops_the_router_before_the_engines(tmp_path: Path, ports: PortAllocator) -> None:
    engine, router = http_server("engine-0", ports.take()), http_server("router", ports.take(), "router")
    plan = plan_of(tmp_path, engine, router)
    order: list[str] = []

    def record(state: RunState) -> None:
        for p in state.processes:
            if p.status == "stopping" and p.name not in order:
                order.append(p.name)

    ready, stop = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(serve(plan, FAST, ready=ready, stop=stop, on_change=record))
    await asyncio.wait_for(ready.wait(), 60)
    running = read_state(tmp_path, "sup")
    assert running is not None and running.status == "running"
    pids = [p.pid for p in running.processes]
    stop.set()
    final = await task
    assert order == ["router", "engine-0"]
    assert final.status == "stopped"
    assert all(p.status == "stopped" and p.pid is None for p in final.processes)
    assert not any(pid is not None and group_alive(pid) for pid in pids)
    assert "starting" in (tmp_path / "sup" / "logs" / "engine-0.log").read_text()


async def test_a_process_that_exits_at_start_fails_the_deploy_with_its_log(
    tmp_path: Path, ports: PortAllocator
) -> None:
    argv = (sys.executable, "-c", "import sys; print('boom: bad flag'); sys.exit(3)")
    plan = plan_of(
        tmp_path,
        http_server("engine-0", ports.take()),
        ProcessSpec(name="engine-1", kind="engine", argv=argv, port=ports.take()),
    )
    with pytest.raises(LocalTargetError, match="engine-1 exited with code 3") as err:
        await serve(plan, FAST)
    assert "boom: bad flag" in err.value.message
    assert err.value.hint is not None and "engine-1.log" in err.value.hint
    state = read_state(tmp_path, "sup")
    assert state is not None and state.status == "failed"
    assert state.process("engine-0").status == "stopped"


async def test_a_missing_program_is_a_clear_error(tmp_path: Path, ports: PortAllocator) -> None:
    spec = ProcessSpec(name="engine-0", kind="engine", argv=("/nonexistent/engine",), port=ports.take())
    with pytest.raises(LocalTargetError, match="cannot start engine-0"):
        await serve(plan_of(tmp_path, spec), FAST)


async def test_health_timeout(tmp_path: Path, ports: PortAllocator) -> None:
    argv = (sys.executable, "-c", "import time; time.sleep(30)")
    spec = ProcessSpec(name="engine-0", kind="engine", argv=argv, port=ports.take())
    settings = SupervisorSettings(health_timeout=0.5, health_interval=0.05, grace_period=1)
    with pytest.raises(LocalTargetError, match="did not answer"):
        await serve(plan_of(tmp_path, spec), settings)


async def test_a_process_ignoring_sigterm_is_killed_after_the_grace_period(
    tmp_path: Path, ports: PortAllocator
) -> None:
    port = ports.take()
    code = (
        "import signal, http.server;"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN);"
        f"http.server.ThreadingHTTPServer(('127.0.0.1', {port}), http.server.SimpleHTTPRequestHandler)"
        ".serve_forever()"
    )
    argv = (sys.executable, "-c", code)
    spec = ProcessSpec(name="engine-0", kind="engine", argv=argv, port=port, health_path="/")
    ready, stop = asyncio.Event(), asyncio.Event()
    settings = SupervisorSettings(health_timeout=10, health_interval=0.05, grace_period=0.5)
    task = asyncio.create_task(serve(plan_of(tmp_path, spec), settings, ready=ready, stop=stop))
    await asyncio.wait_for(ready.wait(), 60)
    stop.set()
    final = await asyncio.wait_for(task, 60)
    assert final.process("engine-0").last_exit == -signal.SIGKILL


async def test_the_workers_of_a_crashed_process_are_killed_before_it_restarts(
    tmp_path: Path, ports: PortAllocator
) -> None:
    port, pidfile = ports.take(), tmp_path / "worker.pid"
    code = (
        "import subprocess, sys, http.server;"
        "w = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']);"
        f"open({str(pidfile)!r}, 'w').write(str(w.pid));"
        f"http.server.ThreadingHTTPServer(('127.0.0.1', {port}), http.server.SimpleHTTPRequestHandler)"
        ".serve_forever()"
    )
    argv = (sys.executable, "-c", code)
    spec = ProcessSpec(name="engine-0", kind="engine", argv=argv, port=port, health_path="/")
    states: list[RunState] = []
    ready, restarted, stop = asyncio.Event(), asyncio.Event(), asyncio.Event()

    def record(state: RunState) -> None:
        states.append(state)
        if state.process("engine-0").restarts:
            restarted.set()

    task = asyncio.create_task(serve(plan_of(tmp_path, spec), FAST, ready=ready, stop=stop, on_change=record))
    try:
        await asyncio.wait_for(ready.wait(), 60)
        worker = int(pidfile.read_text())
        leader = states[-1].process("engine-0").pid
        assert leader is not None
        os.kill(leader, signal.SIGKILL)
        await asyncio.wait_for(restarted.wait(), 60)
        assert not pid_alive(worker)
    finally:
        stop.set()
        await task


async def test_stopping_with_a_control_endpoint_leaves_no_task_pending(
    tmp_path: Path, ports: PortAllocator
) -> None:
    """The runtime scaler waits for a scale request while the supervisor stops: its waiter must end with
    it, or the next garbage collection reports "Task was destroyed but it is pending!"."""
    loop = asyncio.get_running_loop()
    reported: list[str] = []
    loop.set_exception_handler(lambda _, ctx: reported.append(f"{ctx.get('message')} {ctx.get('task')!r}"))
    try:
        plan = LocalPlan(
            release="sup",
            run_dir=tmp_path,
            model="m",
            specs=(http_server("engine-0", ports.take()),),
            control_port=ports.take(),
        )
        ready, stop = asyncio.Event(), asyncio.Event()
        task = asyncio.create_task(serve(plan, FAST, ready=ready, stop=stop))
        await asyncio.wait_for(ready.wait(), 60)
        stop.set()
        await task
        del task
        gc.collect()
        await asyncio.sleep(0)
        assert not reported
    finally:
        loop.set_exception_handler(None)
