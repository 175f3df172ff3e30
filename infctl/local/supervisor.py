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
from dataclasses import dataclass, field, replace
from typing import Any

import httpx

from infctl.errors import LocalTargetError
from infctl.local.admin_token import ensure_token, token_path, with_admin_token
from infctl.local.backoff import next_restart
from infctl.local.control_api import Control
from infctl.local.http import aprobe, async_client
from infctl.local.launch import spawn, tail, terminate
from infctl.local.procs import listens_on, signal_group, start_time
from infctl.local.settings import SupervisorSettings
from infctl.local.spec import LocalPlan, ProcessSpec
from infctl.local.state import ProcessState, RunState, write_state

log = logging.getLogger(__name__)

_HANDOVER_DRAIN_S = 60.0
"""Longest a router handing over may take to finish its streams and exit, beyond ``grace_period``, seconds
(the router's default ``drain_timeout_s`` is 30)."""

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
    retired: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when runtime scaling removes the process: it is not restarted any more."""


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
        self.stage_kinds = [stage[0].kind for stage in plan.stages()]
        self.halt = asyncio.Event()
        self.watchers: dict[str, asyncio.Task[None]] = {}
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
        while not self.halt.is_set() and not child.retired.is_set():
            if child.proc.returncode is not None:
                return f"exited with code {child.proc.returncode} before becoming healthy"
            if await aprobe(self.client, child.spec.health_url):
                self.update(child, status="healthy")
                return None
            if loop.time() >= deadline:
                return f"did not answer {child.spec.health_url} within {self.settings.health_timeout:g} s"
            await self.sleep(self.settings.health_interval)
        return "stopped while starting"

    async def sleep(self, seconds: float, child: _Child | None = None) -> None:
        """Sleep, but wake up early when the supervisor halts (or ``child`` is retired)."""
        events = [self.halt] if child is None else [self.halt, child.retired]
        waiters = [asyncio.ensure_future(e.wait()) for e in events]
        try:
            await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:  # also when the caller is cancelled (a scale-out stopped at shutdown)
            for w in waiters:
                w.cancel()

    def over(self, child: _Child) -> bool:
        return self.halt.is_set() or child.retired.is_set()

    async def keep_alive(self, child: _Child) -> None:
        """Restart ``child`` whenever it exits, until the supervisor halts."""
        while child.proc is not None and not self.over(child):
            proc = child.proc
            waiter = asyncio.ensure_future(proc.wait())
            halted = asyncio.ensure_future(self.halt.wait())
            retired = asyncio.ensure_future(child.retired.wait())
            await asyncio.wait({waiter, halted, retired}, return_when=asyncio.FIRST_COMPLETED)
            for w in (waiter, halted, retired):
                w.cancel()
            if self.over(child):
                return
            if child.proc is not proc:
                continue  # a hand-over replaced it (``hand_over``): watch the successor
            code = child.proc.returncode
            # Whatever the crashed leader forked (an engine's workers) must not hold its port or memory.
            signal_group(child.proc.pid, signal.SIGKILL)
            decision = next_restart(child.streak, time.monotonic() - child.started, self.settings)
            child.streak = decision.streak
            log.warning("%s exited with code %s; restarting in %.1f s", child.spec.name, code, decision.delay)
            self.update(child, status="backoff", last_exit=code, pid=None, pid_started=None)
            await self.sleep(decision.delay, child)
            if self.over(child):
                return
            try:
                await self.launch(child, restart=True)
            except LocalTargetError as err:
                log.error("%s cannot restart: %s", child.spec.name, err.message)
                self.update(child, status="failed", pid=None)
                return
            reason = await self.wait_healthy(child)
            if reason is not None and not self.over(child):
                log.warning("%s %s; stopping it to retry", child.spec.name, reason)
                await terminate(child.proc, self.settings.grace_period)

    async def hand_over(self, child: _Child) -> None:
        """Restart ``child`` (a router) without refusing a connection: its successor starts beside it on
        the same port (routers bind with SO_REUSEPORT), and once the successor listens and answers its
        health URL the old one is told to hand over (SIGUSR1: it stops listening, finishes what its open
        connections send, and exits; ``infctl.router.server.hand_over``). LocalTargetError when the
        successor does not come up (the old one keeps serving)."""
        old = child.proc
        if old is None or old.returncode is not None:
            raise LocalTargetError(f"{child.spec.name} is not running: nothing to hand over")
        new = await spawn(child.spec, self.plan.log_path(child.spec.name))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.health_timeout
        while not (listens_on(new.pid, child.spec.port) and await aprobe(self.client, child.spec.health_url)):
            if new.returncode is not None or loop.time() >= deadline or self.halt.is_set():
                await terminate(new, self.settings.grace_period)
                raise _start_error(self.plan, child.spec, "did not take over its port")
            await asyncio.sleep(min(self.settings.health_interval, 0.05))
        child.proc, child.started = new, time.monotonic()
        restarts = self.state.process(child.spec.name).restarts + 1
        started = {"pid": new.pid, "pid_started": start_time(new.pid), "started_at": time.time()}
        self.update(child, status="healthy", restarts=restarts, **started)
        if signal_group(old.pid, signal.SIGUSR1):
            with contextlib.suppress(TimeoutError):  # it drains its streams (the router's drain_timeout_s)
                await asyncio.wait_for(old.wait(), self.settings.grace_period + _HANDOVER_DRAIN_S)
        await terminate(old, self.settings.grace_period)  # whatever is left of it

    def watch(self, child: _Child) -> None:
        """Restart ``child`` whenever it exits (from now on)."""
        self.watchers[child.spec.name] = asyncio.create_task(self.keep_alive(child))

    async def watch_all(self) -> None:
        """Return once the supervisor halts or no watched process is left."""
        halted = asyncio.ensure_future(self.halt.wait())
        try:
            while live := [t for t in self.watchers.values() if not t.done()]:
                await asyncio.wait({halted, *live}, return_when=asyncio.FIRST_COMPLETED)
                if self.halt.is_set():
                    return
        finally:
            halted.cancel()

    def child(self, name: str) -> _Child:
        return next(c for c in self.children if c.spec.name == name)

    def add_child(self, spec: ProcessSpec) -> _Child:
        """A process started at runtime (scaling out), in the engines' stage so shutdown stops it."""
        child = _Child(spec)
        self.children.append(child)
        self.stages[self.stage_kinds.index(spec.kind)].append(child)
        self.publish(processes=(*self.state.processes, _initial_state(self.plan, spec)))
        return child

    async def retire(self, child: _Child) -> None:
        """Stop ``child`` for good (scaling in) and forget it."""
        child.retired.set()
        watcher = self.watchers.pop(child.spec.name, None)
        if watcher is not None:
            await asyncio.gather(watcher, return_exceptions=True)
        if child.proc is not None and child.proc.returncode is None:
            self.update(child, status="stopping")
            await terminate(child.proc, self.settings.grace_period)
        self.children.remove(child)
        for stage in self.stages:
            if child in stage:
                stage.remove(child)
        self.publish(processes=tuple(p for p in self.state.processes if p.name != child.spec.name))

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
        data_parallel_size=spec.data_parallel_size,
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

    The router and autoscaler get the release's admin token (see :mod:`infctl.local.admin_token`).
    Raises ``LocalTargetError`` when a process cannot start or become healthy. Everything started is stopped
    before this returns or raises; the final state is returned.
    """
    settings = settings or SupervisorSettings()
    stop = stop or asyncio.Event()
    if any(s.kind == "router" for s in plan.specs):
        plan = with_admin_token(plan, ensure_token(token_path(plan)))
    async with async_client(timeout=settings.probe_timeout, transport=transport) as client:
        sup = _Supervisor(plan, settings, client, on_change)
        relay = asyncio.create_task(_relay(stop, sup.halt))
        control: Control | None = None
        sup.publish()
        try:
            # Listening before the autoscaler starts, which is the endpoint's client.
            if plan.control_port is not None:
                control = await Control.start(sup, plan.control_port)
            if await sup.start():
                sup.publish(status="running", control_url=control.url if control else None)
                if ready is not None:
                    ready.set()
                for child in sup.children:
                    sup.watch(child)
                await sup.watch_all()
        except LocalTargetError as err:
            sup.publish(status="failed", error=err.message, hint=err.hint)
            raise
        finally:
            sup.halt.set()
            relay.cancel()
            if control is not None:
                await control.close()
            await asyncio.gather(*sup.watchers.values(), return_exceptions=True)
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
