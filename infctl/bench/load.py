"""The load generator: runs a plan's stages against a target and returns one record per request.

Open loop for rates (a send never waits for an answer, only for its scheduled time, or for a free slot under
``max_concurrency``), closed loop for concurrencies, the trace's own clock for replays. Bodies are encoded
before a request's scheduled time, so the only work between the due time and the send is a task switch;
what remains is measured as send lag. Setting ``stop`` ends dispatch and cancels requests in flight: the
records of finished requests are kept.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import random
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import aiohttp

from infctl.bench.arrivals import arrival_offsets, rate_at
from infctl.bench.client import Clock, Target, send
from infctl.bench.config import LoadPlan, Stage
from infctl.bench.records import RequestRecord
from infctl.bench.workloads.base import RequestSpec

WARMUP_CONCURRENCY = 8
_TIMER_SLACK_S = 0.0012
"""How early a timer-based wait ends; the rest of the wait yields to the loop until the due time."""
_LONG_SLEEP_S = 0.05
"""Sleeps longer than this also wake on ``stop``; shorter ones are plain (cheaper) sleeps."""


@dataclass(frozen=True, slots=True)
class Progress:
    """A live view of the run, handed to the ``progress`` callback a few times a second."""

    elapsed_s: float
    stage: int
    stages: int
    stage_label: str
    sent: int
    completed: int
    failed: int
    in_flight: int
    requested_rate: float | None
    """What the current stage asks for now (None for concurrency and replay)."""
    achieved_rate: float
    """Sends per second over the last ~2 s."""
    send_lag_ms: float
    """Worst send lag over the last ~2 s."""
    errors: dict[str, int] = field(default_factory=dict)


ProgressFn = Callable[[Progress], None]


@dataclass
class LoopStats:
    """How the client itself fared: CPU and event-loop responsiveness."""

    cpu_s: float = 0.0
    wall_s: float = 0.0
    loop_lag_s: list[float] = field(default_factory=list)
    gate_waits: int = 0
    """Sends that waited for a free slot under max_concurrency."""


class LoadGenerator:
    def __init__(
        self,
        session: aiohttp.ClientSession,
        target: Target,
        plan: LoadPlan,
        *,
        clock: Clock,
        seed: int = 0,
        stop: asyncio.Event | None = None,
    ) -> None:
        self.session = session
        self.target = target
        self.plan = plan
        self.clock = clock
        self.rng = random.Random(seed)
        self.stop = stop or asyncio.Event()
        self.headers = target.request_headers()
        self.records: list[RequestRecord] = []
        self.stats = LoopStats()
        self.stage = 0
        self.stage_start = 0.0
        self.sent = 0
        self.failed = 0
        self.in_flight = 0
        self.errors: dict[str, int] = {}
        self.exhausted = False
        self.interrupted = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._held: RequestSpec | None = None
        """A request drawn but past its stage's end, for the next stage."""
        self._sessions: dict[int, asyncio.Event] = {}
        self._gate = asyncio.Semaphore(plan.max_concurrency) if plan.max_concurrency else None
        self._index = itertools.count()
        self._recent: deque[tuple[float, float]] = deque(maxlen=1 << 16)
        """(send time, send lag) of recent sends, for the live view."""

    # -- the run ---------------------------------------------------------------------------------------
    async def warmup(self, specs: Iterator[RequestSpec], n: int) -> None:
        """Send ``n`` requests, ``WARMUP_CONCURRENCY`` at a time, and forget them."""
        pending = list(itertools.islice(specs, n))

        async def worker() -> None:
            while pending and not self.stop.is_set():
                spec = pending.pop()
                rec = RequestRecord(index=-1, stage=-1, scheduled_s=self.clock())
                await send(self.session, self.target, self.headers, self.target.body(spec), rec,
                           spec.input_tokens, self.clock)  # fmt: skip

        await asyncio.gather(*(worker() for _ in range(min(WARMUP_CONCURRENCY, n))))

    async def run(self, specs: Iterator[RequestSpec]) -> list[RequestRecord]:
        cpu0, wall0 = time.process_time(), self.clock()
        monitor = asyncio.create_task(self._watch_loop())
        try:
            for i, stage in enumerate(self.plan.stages):
                if self.stop.is_set() or self.exhausted:
                    break
                self.stage, self.stage_start = i, self.clock()
                if stage.mode == "concurrency":
                    await self._closed_loop(i, stage, specs)
                else:
                    await self._open_loop(i, stage, specs)
            await self._drain()
        finally:
            monitor.cancel()
            self.stats.cpu_s = time.process_time() - cpu0
            self.stats.wall_s = self.clock() - wall0
        self.records.sort(key=lambda r: r.index)
        return self.records

    async def _open_loop(self, i: int, stage: Stage, specs: Iterator[RequestSpec]) -> None:
        t0 = self.stage_start
        if stage.mode == "rate":
            offsets: Iterator[float] = arrival_offsets(
                stage, self.plan.arrivals, self.plan.burstiness, self.rng
            )
        else:
            offsets = iter(())  # replay: each spec carries its own offset
        n = 0
        base: float | None = None  # replay: the stage starts at its first request's timestamp
        while not self.stop.is_set():
            if stage.num_requests is not None and n >= stage.num_requests:
                return
            spec = self._take(specs)
            if spec is None:
                self.exhausted = True
                return
            if stage.mode == "rate":
                off = next(offsets, math.inf)
            else:
                if base is None:
                    base = spec.at_s or 0.0
                off = (spec.at_s or 0.0) - base
            if stage.duration_s is not None and off >= stage.duration_s:
                self._held = spec  # the next stage sends it
                break
            body = self.target.body(spec)
            due = t0 + off
            if await self._wait_until(due):
                return
            if self._gate is not None:
                if self._gate.locked():
                    self.stats.gate_waits += 1
                await self._gate.acquire()
            self._launch(spec, body, i, due)
            n += 1
            # Let the new task send now, even when behind schedule (a burst must not wait for the loop).
            await asyncio.sleep(0)
        if stage.duration_s is not None and not self.stop.is_set():
            await self._sleep(t0 + stage.duration_s - self.clock())

    async def _closed_loop(self, i: int, stage: Stage, specs: Iterator[RequestSpec]) -> None:
        assert stage.concurrency is not None
        deadline = self.stage_start + stage.duration_s if stage.duration_s else math.inf
        budget = itertools.count() if stage.num_requests is None else iter(range(stage.num_requests))

        async def worker() -> None:
            while not self.stop.is_set() and self.clock() < deadline and next(budget, None) is not None:
                spec = self._take(specs)
                if spec is None:
                    self.exhausted = True
                    return
                await self._one(spec, self.target.body(spec), i, self.clock(), gated=False)

        workers = [asyncio.create_task(worker()) for _ in range(stage.concurrency)]
        for w in workers:
            self._tasks.add(w)
            w.add_done_callback(self._tasks.discard)
        await self._until_done_or_stopped(workers)

    def _take(self, specs: Iterator[RequestSpec]) -> RequestSpec | None:
        held, self._held = self._held, None
        return held if held is not None else next(specs, None)

    def _launch(self, spec: RequestSpec, body: bytes, stage: int, due: float) -> None:
        task = asyncio.create_task(self._one(spec, body, stage, due, gated=self._gate is not None))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _one(self, spec: RequestSpec, body: bytes, stage: int, due: float, *, gated: bool) -> None:
        rec = RequestRecord(index=next(self._index), stage=stage, scheduled_s=due,
                            session=spec.session, group=spec.group)  # fmt: skip
        done: asyncio.Event | None = None
        try:
            if spec.session is not None:
                before = self._sessions.get(spec.session)
                done = self._sessions[spec.session] = asyncio.Event()
                if before is not None and not before.is_set():
                    await before.wait()
                    rec.scheduled_s = max(due, self.clock())  # waiting for the previous turn is not lag
            now = self.clock()
            self._recent.append((now, now - rec.scheduled_s))
            self.sent += 1
            self.in_flight += 1
            try:
                await send(self.session, self.target, self.headers, body, rec, spec.input_tokens, self.clock)
            finally:
                self.in_flight -= 1
            self.records.append(rec)
            if rec.error_kind:
                self.failed += 1
                self.errors[rec.error_kind] = self.errors.get(rec.error_kind, 0) + 1
        finally:
            if gated and self._gate is not None:
                self._gate.release()
            if done is not None and spec.session is not None:
                done.set()
                if self._sessions.get(spec.session) is done:
                    del self._sessions[spec.session]

    async def _until_done_or_stopped(self, tasks: list[asyncio.Task[None]]) -> None:
        stopper = asyncio.ensure_future(self.stop.wait())
        try:
            await asyncio.wait([*tasks, stopper], return_when=asyncio.FIRST_COMPLETED)
            while not self.stop.is_set() and not all(t.done() for t in tasks):
                await asyncio.wait([*tasks, stopper], return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopper.cancel()

    async def _drain(self) -> None:
        if self._tasks and not self.stop.is_set():
            await self._until_done_or_stopped(list(self._tasks))
        if self._tasks:
            self.interrupted = True
            for t in list(self._tasks):
                t.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.stop.is_set():
            self.interrupted = True

    async def _wait_until(self, due: float) -> bool:
        """Return at ``due`` (clock time), or True as soon as ``stop`` is set.

        asyncio's timers wake up to 1 ms late (epoll counts milliseconds), which at 1,000 req/s is a whole
        gap: sleep to about 1 ms before ``due``, then yield to the loop until it is time.
        """
        while True:
            delay = due - self.clock()
            if delay <= 0:
                return self.stop.is_set()
            if delay > _TIMER_SLACK_S:
                if await self._sleep(delay - _TIMER_SLACK_S):
                    return True
            else:
                await asyncio.sleep(0)

    async def _sleep(self, delay: float) -> bool:
        """Sleep ``delay`` seconds; True when ``stop`` was set meanwhile."""
        if delay <= 0:
            return self.stop.is_set()
        if delay < _LONG_SLEEP_S:
            await asyncio.sleep(delay)
            return self.stop.is_set()
        try:
            await asyncio.wait_for(self.stop.wait(), delay)
        except TimeoutError:
            return False
        return True

    async def _watch_loop(self, interval: float = 0.01) -> None:
        lags = self.stats.loop_lag_s
        while True:
            t = self.clock()
            await asyncio.sleep(interval)
            lags.append(self.clock() - t - interval)

    # -- live view -------------------------------------------------------------------------------------
    def progress(self, window_s: float = 2.0) -> Progress:
        now = self.clock()
        while self._recent and self._recent[0][0] < now - window_s:
            self._recent.popleft()
        recent = self._recent
        span = min(window_s, max(now - self.stage_start, 1e-9))
        stage = self.plan.stages[min(self.stage, len(self.plan.stages) - 1)]
        return Progress(
            elapsed_s=now,
            stage=self.stage,
            stages=len(self.plan.stages),
            stage_label=stage.label,
            sent=self.sent,
            completed=len(self.records),
            failed=self.failed,
            in_flight=self.in_flight,
            requested_rate=rate_at(stage, now - self.stage_start),
            achieved_rate=sum(1 for p in recent if p[0] >= now - span) / span,
            send_lag_ms=max((p[1] for p in recent), default=0.0) * 1000.0,
            errors=dict(self.errors),
        )
