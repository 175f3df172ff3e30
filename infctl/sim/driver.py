"""The simulated engine's driver: one asyncio step loop per engine core, in scaled real time.

The driver owns an ``EngineCore``: while the core has work it calls ``step(now)``, sleeps until the step's
deadline (``step_start + duration * time_scale`` on the wall clock; the next step starts at that deadline,
not at wake-up, so sleep overshoot never accumulates), then delivers the step's tokens to the waiting
requests' queues and records their timings. Idle, it waits for ``submit`` (or the core's next ready time).
One loop per instance, never a timer per request (except a profile's ``request_overhead_us``: a request
reaches the core that long after ``submit``, as vLLM's API server tokenizes it before its engine core sees it,
without stalling the steps in between).

Times given to the core and recorded in histograms are *simulated* seconds: wall seconds since start
divided by ``time_scale``. At ``--time-scale 0.1`` a 50 ms simulated TTFT is seen after 5 wall ms by
clients but reported as 0.05 s in ``/metrics``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from infctl.sim.faults import FaultState
from infctl.sim.personality.engine_view import EngineMetrics
from infctl.sim.types import CoreStats, KVEvent, SimRequest, StepOutput

log = logging.getLogger(__name__)

RESYNC_SECONDS = 0.05
"""Wall seconds the loop may fall behind its deadlines before the step clock restarts from now."""
TIMER_SLACK_SECONDS = 0.0012
"""How early the timer of a step that gives a request its first token fires; the rest of the wait yields
to the loop until the deadline. asyncio's selector waits whole milliseconds, rounded up, so a plain sleep
delivers 0-1 ms after the step's end (0.9 ms median on this project's 2-core host): a lag no GPU engine
has, added to every live TTFT (a 10 ms short-prompt prefill arrived 11 ms after its request)."""


class EngineCoreLike(Protocol):
    """The contract of ``infctl.sim.scheduler.EngineCore`` the driver relies on."""

    def add_request(self, req: SimRequest, now: float) -> None: ...
    def abort(self, request_id: str) -> None: ...
    def has_work(self) -> bool: ...
    def next_ready_time(self) -> float | None: ...
    def step(self, now: float) -> StepOutput: ...
    def stats(self) -> CoreStats: ...
    def reset_prefix_cache(self) -> bool: ...


class SimClock:
    """Simulated seconds since start: wall (loop) time divided by ``time_scale``."""

    def __init__(self, time_scale: float) -> None:
        self.scale = time_scale
        self._loop = asyncio.get_running_loop()
        self._t0 = self._loop.time()

    def now(self) -> float:
        return (self._loop.time() - self._t0) / self.scale

    def to_sim(self, wall: float) -> float:
        return (wall - self._t0) / self.scale

    def to_wall(self, sim: float) -> float:
        return self._t0 + sim * self.scale


@dataclass(frozen=True, slots=True)
class Delta:
    """Tokens handed to a request's consumer in one wake-up (coalesced by ``stream_interval``)."""

    tokens: int
    finished: bool = False
    finish_reason: str | None = None


@dataclass(slots=True, eq=False)
class SampleGroup:
    """The sequences of one prompt of an ``n`` > 1 request, as vLLM's ``ParentRequest``: once the last has
    finished, ``n`` and the most tokens one of them generated are observed (each other request: 1 and its
    own count). vLLM observes neither for a request the client aborted, so neither is done here."""

    n: int
    left: int
    most: int = 0


@dataclass(slots=True, eq=False)
class RequestTrack:
    """A request in flight: its queue of deltas and its timings (simulated seconds)."""

    request: SimRequest
    interval: int
    queue: asyncio.Queue[Delta] = field(default_factory=asyncio.Queue)
    pending: int = 0
    produced: int = 0
    cached_tokens: int = 0
    scheduled_at: float | None = None
    first_token_at: float | None = None
    last_token_at: float | None = None
    finish_reason: str | None = None
    done: bool = False
    preemptions: int = 0
    group: SampleGroup | None = None


class Driver:
    """Runs one core in real time (scaled) and fans its tokens out to the requests' queues."""

    def __init__(
        self,
        core: EngineCoreLike,
        clock: SimClock,
        faults: FaultState,
        metrics: EngineMetrics,
        *,
        kv_sink: Callable[[Sequence[KVEvent]], None] | None = None,
        request_overhead: Callable[[int], float] | None = None,
    ) -> None:
        self.core = core
        self.request_overhead = request_overhead
        """Simulated seconds between ``submit`` and the request's entry into the core, given its prompt
        length (``SimProfile.request_overhead``); None: none."""
        self._arriving: dict[str, asyncio.TimerHandle] = {}
        """Requests submitted but not yet in the core (``request_overhead``), by id."""
        self.clock = clock
        self.faults = faults
        self.metrics = metrics
        self.kv_sink = kv_sink
        self._tracks: dict[str, RequestTrack] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._generated = 0

    # -- lifecycle -------------------------------------------------------------------------------------
    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="sim-driver")

    def kill(self) -> None:
        """Stop stepping at once and end every request with finish reason "abort"."""
        if self._task is not None:
            self._task.cancel()
            self._task = None
        for handle in self._arriving.values():
            handle.cancel()
        self._arriving.clear()
        for track in list(self._tracks.values()):
            self._end(track, "abort", self.clock.now())

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        self.kill()

    # -- requests --------------------------------------------------------------------------------------
    def submit(self, req: SimRequest, *, interval: int = 1, group: SampleGroup | None = None) -> RequestTrack:
        track = RequestTrack(req, max(1, interval), group=group)
        delay = self._overhead(req)
        if delay > 0:
            clock = self.clock
            # The core's clock starts when the delay ends, not when a late event loop gets to the callback.
            at = clock.now() + delay
            self._arriving[req.request_id] = asyncio.get_running_loop().call_at(
                clock.to_wall(at), self._arrive_late, req, at
            )
        else:
            self._arrive(req, self.clock.now())
        self._tracks[req.request_id] = track
        return track

    def _overhead(self, req: SimRequest) -> float:
        return 0.0 if self.request_overhead is None else self.request_overhead(len(req.prompt_ids))

    def _arrive(self, req: SimRequest, now: float) -> None:
        self.core.add_request(req, now)
        self._wake.set()

    def _arrive_late(self, req: SimRequest, now: float) -> None:
        self._arriving.pop(req.request_id, None)
        try:
            self._arrive(req, now)
        except ValueError:
            # The routes validate lengths first, so this is a bug; end the request rather than hang it.
            log.exception("the engine core refused request %s", req.request_id)
            track = self._tracks.get(req.request_id)
            if track is not None:
                self._end(track, "abort", now)

    def abort(self, request_id: str) -> None:
        track = self._tracks.get(request_id)
        if track is not None:
            handle = self._arriving.pop(request_id, None)
            if handle is not None:
                handle.cancel()
            else:
                self.core.abort(request_id)
            self._end(track, "abort", self.clock.now())

    @property
    def in_flight(self) -> int:
        return len(self._tracks)

    def stats(self) -> CoreStats:
        return self.core.stats()

    def reset_cache(self) -> bool:
        """Drop the prefix cache; False while requests are in flight (as vLLM and SGLang refuse)."""
        if self._tracks or self.core.has_work():
            return False
        return self.core.reset_prefix_cache()

    def gen_throughput(self) -> float:
        return self.metrics.gen_throughput(self.clock.now(), self._generated)

    # -- the loop --------------------------------------------------------------------------------------
    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        clock = self.clock
        prev_end: float | None = None
        while True:
            if not self.faults.resumed.is_set():
                prev_end = None
                await self.faults.resumed.wait()
                continue
            ready = self.core.next_ready_time()
            if not self.core.has_work() or (ready is not None and clock.to_wall(ready) > loop.time()):
                prev_end = None
                await self._idle(loop, ready)
                continue
            wall = loop.time()
            start = prev_end if prev_end is not None and wall - prev_end < RESYNC_SECONDS else wall
            sim_start = clock.to_sim(start)
            out = self.core.step(sim_start)
            if out.duration <= 0 and not out.events:
                prev_end = None  # nothing runnable yet
                await self._idle(loop, self.core.next_ready_time())
                continue
            duration = out.duration * self.faults.plan.slowdown
            end = start + duration * clock.scale
            # Always yield, so that HTTP handlers run between back-to-back steps.
            await _until(loop, end, precise=self._gives_first_token(out))
            prev_end = end
            self._deliver(out, sim_start, sim_start + duration)

    def _gives_first_token(self, out: StepOutput) -> bool:
        """Whether the step ends some request's wait for its first token (what TTFT measures)."""
        tracks = self._tracks
        for ev in out.events:
            if ev.new_tokens:
                track = tracks.get(ev.request_id)
                if track is not None and track.first_token_at is None:
                    return True
        return False

    async def _idle(self, loop: asyncio.AbstractEventLoop, ready: float | None) -> None:
        """Until a request is submitted or the core's next ready time (remote KV arriving)."""
        self._wake.clear()
        timeout = None if ready is None else max(0.0, self.clock.to_wall(ready) - loop.time())
        if timeout is None and self.core.has_work():
            timeout = 0.01  # work the core cannot schedule and no ready time: poll, never spin
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout)

    def _deliver(self, out: StepOutput, start: float, end: float) -> None:
        m = self.metrics
        if out.kv_events and self.kv_sink is not None:
            self.kv_sink(out.kv_events)
        if out.prefill_tokens or out.decode_seqs:
            m.observe("iteration_tokens", out.prefill_tokens + out.decode_seqs)
        for rid in out.preempted:
            preempted = self._tracks.get(rid)
            if preempted is not None:
                preempted.preemptions += 1
        for ev in out.events:
            track = self._tracks.get(ev.request_id)
            if track is None:
                continue
            if track.scheduled_at is None:
                track.scheduled_at = start
            first = False
            if ev.new_tokens:
                n = ev.new_tokens
                if track.first_token_at is None:
                    first = True
                    track.first_token_at = end
                    track.cached_tokens = ev.cached_tokens
                    m.observe("ttft", end - track.request.arrival)
                elif track.last_token_at is not None:
                    m.observe("itl", (end - track.last_token_at) / n, n)
                track.last_token_at = end
                track.produced += n
                track.pending += n
                self._generated += n
            if ev.finished:
                self._end(track, ev.finish_reason or "length", end)
            elif track.pending >= track.interval or (first and track.pending):
                track.queue.put_nowait(Delta(track.pending))
                track.pending = 0
        m.sample_generation(end, self._generated)

    def _end(self, track: RequestTrack, reason: str, now: float) -> None:
        self._tracks.pop(track.request.request_id, None)
        track.done = True
        track.finish_reason = reason
        track.queue.put_nowait(Delta(track.pending, True, reason))
        track.pending = 0
        self._record(track, reason, now)

    def _record(self, track: RequestTrack, reason: str, now: float) -> None:
        m = self.metrics
        m.finish("abort" if reason not in ("stop", "length") else reason)
        if reason in ("stop", "length"):
            self._record_sample(track)
        if track.first_token_at is None or track.scheduled_at is None:
            return
        req = track.request
        scheduled, first = track.scheduled_at, track.first_token_at
        m.observe("e2e", now - req.arrival)
        # vLLM's queue time starts when its engine core gets the request, after the API server's share.
        m.observe("queue", max(0.0, scheduled - req.arrival - self._overhead(req)))
        m.observe("prefill", first - scheduled)
        m.observe("decode", now - first)
        m.observe("inference", now - scheduled)
        m.observe("prompt_tokens", len(req.prompt_ids))
        m.observe("generation_tokens", track.produced)
        m.observe("max_tokens", req.max_tokens)
        m.observe("num_preemptions", track.preemptions)
        m.observe("prefill_kv_computed", len(req.prompt_ids) - track.cached_tokens)
        if track.produced > 1:
            m.observe("tpot", (now - first) / (track.produced - 1))

    def _record_sample(self, track: RequestTrack) -> None:
        """``n`` and the most tokens generated, per request or per ``SampleGroup`` once it is complete."""
        group = track.group
        if group is None:
            group = SampleGroup(1, 1)
        group.most = max(group.most, track.produced)
        group.left -= 1
        if group.left == 0:
            self.metrics.observe("n", group.n)
            self.metrics.observe("max_generation_tokens", group.most)


async def _until(loop: asyncio.AbstractEventLoop, deadline: float, *, precise: bool) -> None:
    """Return at ``deadline`` (loop time), yielding to the loop at least once. ``precise``: the timer fires
    ``TIMER_SLACK_SECONDS`` early and the rest of the wait yields to the loop (HTTP handlers keep running)
    until the deadline; otherwise a plain sleep, which costs no CPU and whose lag no token's time inherits
    (steps chain from deadlines, not wake-ups)."""
    delay = deadline - loop.time()
    if not precise:
        await asyncio.sleep(max(0.0, delay))
        return
    while True:
        await asyncio.sleep(delay - TIMER_SLACK_SECONDS if delay > TIMER_SLACK_SECONDS else 0)
        delay = deadline - loop.time()
        if delay <= 0:
            return
