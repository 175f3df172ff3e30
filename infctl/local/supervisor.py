"""The local supervisor: runs a plan's processes, restarts crashed ones, stops them all cleanly.

Each process leads its own process group, so stopping it also stops whatever it forked. Processes start kind
by kind (engines, then router, then autoscaler), each kind once the previous one is healthy, and stop in the
reverse order. A process that exits on its own is restarted after the delay ``backoff.next_restart`` decides.
Every change is written to ``<run_dir>/<release>/state.json`` for ``status`` and ``delete`` in other shells.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import httpx

from infctl.errors import LocalTargetError
from infctl.local.backoff import next_restart
from infctl.local.http import aprobe, async_client
from infctl.local.launch import spawn, tail, terminate
from infctl.local.procs import signal_group, start_time
from infctl.local.settings import SupervisorSettings
from infctl.local.spec import LocalPlan, ProcessSpec
from infctl.local.state import ProcessState, RunState, write_state

log = logging.getLogger(__name__)

OnChange = Callable[[RunState], None]
"""Called with the new state after every change (the CLI redraws its table)."""


@dataclass
class _Child:
    spec: ProcessSpec
    proc: asyncio.subprocess.Process | None = None
    started: float = 0.0
    """Monotonic time the current incarnation started."""
    streak: int = 0
    """Consecutive crashes (see ``next_restart``)."""


class _Supervisor:
    def __init__(
        self,
        plan: LocalPlan,
        settings: SupervisorSettings,
        client: httpx.AsyncClient,
        on_change: OnChange | None,
    ) -> None:
        self.plan, self.settings, self.client, self.on_change = plan, settings, client, on_change
        self.children = [_Child(spec) for spec in plan.specs]
        by_name = {c.spec.name: c for c in self.children}
        self.stages = [[by_name[spec.name] for spec in stage] for stage in plan.stages()]
        self.halt = asyncio.Event()
        self.state = RunState(
            release=plan.release,
            supervisor_pid=os.getpid(),
            supervisor_started=start_time(os.getpid()),
            started_at=time.time(),
            status="starting",
            processes=tuple(_initial_state(plan, spec) for spec in plan.specs),
            grace_period=settings.grace_period,
        )

    def publish(self, **changes: Any) -> None:
        self.state = replace(self.state, **changes)
        write_state(self.plan.run_dir, self.state)
        if self.on_change is not None:
            self.on_change(self.state)

    def update(self, child: _Child, **changes: Any) -> None:
        current = self.state.process(child.spec.name)
        self.publish(processes=self.state.with_process(replace(current, **changes)).processes)

    async def start(self) -> bool:
        """Start every stage and wait for its health; False when asked to stop meanwhile."""
        for children in self.stages:
            for child in children:
                await self.launch(child)
            reasons = await asyncio.gather(*(self.wait_healthy(c) for c in children))
            if self.halt.is_set():
                return False
            for child, reason in zip(children, reasons, strict=True):
                if reason is not None:
                    self.update(child, status="failed")
                    raise _start_error(self.plan, child.spec, reason)
        return True

    async def launch(self, child: _Child, *, restart: bool = False) -> None:
        child.proc = await spawn(child.spec, self.plan.log_path(child.spec.name))
        child.started = time.monotonic()
        restarts = self.state.process(child.spec.name).restarts + int(restart)
        pid = child.proc.pid
        started = {"pid": pid, "pid_started": start_time(pid), "started_at": time.time()}
        self.update(child, status="starting", restarts=restarts, **started)

    async def wait_healthy(self, child: _Child) -> str | None:
        """None once the health URL answers 200, else why not (exited, timed out, asked to stop)."""
        assert child.proc is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.health_timeout
        while not self.halt.is_set():
            if child.proc.returncode is not None:
                return f"exited with code {child.proc.returncode} before becoming healthy"
            if await aprobe(self.client, child.spec.health_url):
                self.update(child, status="healthy")
                return None
            if loop.time() >= deadline:
                return f"did not answer {child.spec.health_url} within {self.settings.health_timeout:g} s"
            await self.sleep(self.settings.health_interval)
        return "stopped while starting"

    async def sleep(self, seconds: float) -> None:
        """Sleep, but wake up early when the supervisor halts."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.halt.wait(), seconds)

    async def keep_alive(self, child: _Child) -> None:
        """Restart ``child`` whenever it exits, until the supervisor halts."""
        while child.proc is not None and not self.halt.is_set():
            waiter = asyncio.ensure_future(child.proc.wait())
            halted = asyncio.ensure_future(self.halt.wait())
            await asyncio.wait({waiter, halted}, return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
            halted.cancel()
            if self.halt.is_set():
                return
            code = child.proc.returncode
            # Whatever the crashed leader forked (an engine's workers) must not hold its port or memory.
            signal_group(child.proc.pid, signal.SIGKILL)
            decision = next_restart(child.streak, time.monotonic() - child.started, self.settings)
            child.streak = decision.streak
            log.warning("%s exited with code %s; restarting in %.1f s", child.spec.name, code, decision.delay)
            self.update(child, status="backoff", last_exit=code, pid=None, pid_started=None)
            await self.sleep(decision.delay)
            if self.halt.is_set():
                return
            try:
                await self.launch(child, restart=True)
            except LocalTargetError as err:
                log.error("%s cannot restart: %s", child.spec.name, err.message)
                self.update(child, status="failed", pid=None)
                return
            reason = await self.wait_healthy(child)
            if reason is not None and not self.halt.is_set():
                log.warning("%s %s; stopping it to retry", child.spec.name, reason)
                await terminate(child.proc, self.settings.grace_period)

    async def shutdown(self) -> None:
        """Stop every process, the last stage first (router before engines)."""
        final = "failed" if self.state.status == "failed" else "stopped"
        self.publish(status="stopping")
        for children in reversed(self.stages):
            await asyncio.gather(*(self.stop_child(c) for c in children))
        self.publish(status=final)

    async def stop_child(self, child: _Child) -> None:
        if child.proc is None:
            self.update(child, status="stopped")
            return
        self.update(child, status="stopping")
        code = await terminate(child.proc, self.settings.grace_period)
        self.update(child, status="stopped", pid=None, pid_started=None, last_exit=code)


def _initial_state(plan: LocalPlan, spec: ProcessSpec) -> ProcessState:
    return ProcessState(
        name=spec.name,
        kind=spec.kind,
        role=spec.role,
        group=spec.group,
        pool=spec.pool,
        port=spec.port,
        url=spec.url,
        health_url=spec.health_url,
        log=str(plan.log_path(spec.name)),
    )


def _start_error(plan: LocalPlan, spec: ProcessSpec, reason: str) -> LocalTargetError:
    path = plan.log_path(spec.name)
    last = tail(path)
    hint = f"read its log: {path}"
    if "address already in use" in last.lower():
        hint = f"port {spec.port} is taken by another program: stop it or set local.base_port to a free range"
    detail = f"; last log lines:\n{last}" if last else ""
    return LocalTargetError(f"{spec.name} {reason}{detail}", hint=hint)


async def serve(
    plan: LocalPlan,
    settings: SupervisorSettings | None = None,
    *,
    ready: asyncio.Event | None = None,
    stop: asyncio.Event | None = None,
    on_change: OnChange | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> RunState:
    """Run ``plan`` until ``stop`` is set; ``ready`` is set once every process is healthy.

    Raises ``LocalTargetError`` when a process cannot start or become healthy. Everything started is stopped
    before this returns or raises; the final state is returned.
    """
    settings = settings or SupervisorSettings()
    stop = stop or asyncio.Event()
    async with async_client(timeout=settings.probe_timeout, transport=transport) as client:
        sup = _Supervisor(plan, settings, client, on_change)
        relay = asyncio.create_task(_relay(stop, sup.halt))
        watchers: list[asyncio.Task[None]] = []
        sup.publish()
        try:
            if await sup.start():
                sup.publish(status="running")
                if ready is not None:
                    ready.set()
                watchers = [asyncio.create_task(sup.keep_alive(c)) for c in sup.children]
                await asyncio.gather(*watchers)
        except LocalTargetError as err:
            sup.publish(status="failed", error=err.message, hint=err.hint)
            raise
        finally:
            sup.halt.set()
            relay.cancel()
            await asyncio.gather(*watchers, return_exceptions=True)
            await sup.shutdown()
    return sup.state


async def _relay(source: asyncio.Event, target: asyncio.Event) -> None:
    await source.wait()
    target.set()


def run(
    plan: LocalPlan, settings: SupervisorSettings | None = None, *, on_change: OnChange | None = None
) -> RunState:
    """Run the supervisor in the foreground until SIGINT, SIGTERM or SIGHUP (the sync entry point)."""

    async def main() -> RunState:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        signals = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
        for sig in signals:
            loop.add_signal_handler(sig, stop.set)
        try:
            return await serve(plan, settings, stop=stop, on_change=on_change)
        finally:
            for sig in signals:
                loop.remove_signal_handler(sig)

    return asyncio.run(main())
