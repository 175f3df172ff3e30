"""The simulation proper: traffic -> router -> engines on one virtual clock (see ``simulate`` in ``run``).

Each engine follows the driving rule of :func:`infctl.sim.virtual.run_until_idle`, generalised to many cores
on one event heap: while it has work it calls ``step(now)`` and delivers the step's tokens at
``now + duration``, where the next step starts; a step that ran nothing waits for ``next_ready_time()``; an
idle engine is woken by the next request routed to it. Only engines with work are ever stepped, and the clock
jumps from event to event.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from infctl.bench.records import RequestRecord
from infctl.router.errors import NoBackendError
from infctl.router.snapshot import RequestInfo
from infctl.sim.cluster.config import SimConfig
from infctl.sim.cluster.events import READY, REFUSED, SCALE, SCRAPE, STEP_END, TRAFFIC, WAKE, EventQueue
from infctl.sim.cluster.fleet import Fleet, SimEngine
from infctl.sim.cluster.prompts import PromptSource
from infctl.sim.cluster.routing import SimRouter
from infctl.sim.cluster.scaling import ReplicaPoint, Scaler, pick_removals
from infctl.sim.cluster.traffic import Send, Traffic
from infctl.sim.types import SimRequest, StepOutput


@dataclass(frozen=True, slots=True)
class SimProgress:
    """A live view of a long run, for a progress line."""

    sim_time_s: float
    sent: int
    completed: int
    total: int | None
    """Requests the workload holds (None: the plan decides)."""
    engines: int
    wall_s: float


ProgressFn = Callable[[SimProgress], None]

REFUSAL_S = 0.001
"""Seconds from sending a request the router or engine refuses (400, 503) to the client seeing the refusal."""


class _Flight:
    __slots__ = ("engine", "expected", "got_first", "prompt_tokens", "record", "send")

    def __init__(self, send: Send, record: RequestRecord, engine: SimEngine, prompt: int, expected: int):
        self.send = send
        self.record = record
        self.engine = engine
        self.prompt_tokens = prompt
        self.expected = expected
        self.got_first = False


class Simulation:
    """One run's mutable state. ``run()`` once; then read ``records``, ``fleet``, ``router``, ``replicas``."""

    def __init__(
        self,
        cfg: SimConfig,
        prompts: PromptSource,
        *,
        progress: ProgressFn | None = None,
        progress_interval_s: float = 0.5,
    ) -> None:
        self.cfg = cfg
        self.prompts = prompts
        self.q = EventQueue()
        options = {**cfg.engine_options, "kv_events": True} if cfg.kv_events else cfg.engine_options
        self.fleet = Fleet(cfg.profile, gpus_per_engine=cfg.gpus_per_engine, engine_options=options)
        self.router = SimRouter(cfg.policy, cfg.pools)
        self.scaler = Scaler(cfg.autoscale) if cfg.autoscale is not None else None
        self.traffic = Traffic(prompts.specs(), cfg.load, cfg.seed)
        self.records: list[RequestRecord] = []
        self.replicas: list[ReplicaPoint] = []
        self.flights: dict[str, _Flight] = {}
        self.by_id: dict[str, SimEngine] = {}
        self.steps = 0
        self.events = 0
        self.scrapes = 0
        self.too_long = 0
        """Requests refused because prompt + output exceed the profile's max_model_len."""
        self.end_time = 0.0
        self._progress = progress
        self._progress_every = progress_interval_s
        self._sent = 0
        self._traffic_at: float | None = None

    # -- the loop ------------------------------------------------------------------------------------
    def run(self) -> None:
        cfg, q = self.cfg, self.q
        for _ in range(cfg.engines):
            self._add_engine(0.0, 0.0)
        q.push(0.0, SCRAPE)
        if self.scaler is not None:
            q.push(0.0, SCALE)
        self._dispatch(self.traffic.start(0.0), 0.0)
        self._schedule_traffic()
        self._note_replicas(0.0)
        wall0 = last_report = time.perf_counter()
        limit = cfg.max_time_s
        pop = q.pop
        while q:
            t, kind, payload = pop()
            if limit is not None and t > limit:
                break
            self.events += 1
            if kind == STEP_END:
                self._step_end(payload[0], payload[1], t)
            elif kind == WAKE:
                if type(payload) is tuple:  # a request reaching its engine's core (after its overhead)
                    self._arrive(payload[0], payload[1], t)
                elif payload.wake_at == t:
                    payload.wake_at = None
                    if not payload.stepping:
                        self._step(payload, t)
            elif kind == TRAFFIC:
                if t != self._traffic_at:
                    continue  # superseded
                self._traffic_at = None
                self._dispatch(self.traffic.advance(t), t)
                self._schedule_traffic()
            elif kind == SCRAPE:
                self.scrapes += 1
                self.router.scrape(self.fleet.live(), t)
                if self._busy():
                    q.push(t + cfg.scrape_interval_s, SCRAPE)
            elif kind == SCALE:
                self._scale(t)
            elif kind == REFUSED:
                self._dispatch(self.traffic.finished(payload, t), t)
                self._schedule_traffic()
            elif kind == READY:
                self._ready(payload, t)
            if self._progress is not None and not self.events & 0xFFF:
                now = time.perf_counter()
                if now - last_report >= self._progress_every:
                    last_report = now
                    self._progress(self.snapshot_progress(t, now - wall0))
        self.end_time = max((r.end_s for r in self.records), default=0.0)
        if self.flights:
            self._time_out(limit if limit is not None else q.now)
        if self._progress is not None:
            self._progress(self.snapshot_progress(self.end_time, time.perf_counter() - wall0))

    def snapshot_progress(self, t: float, wall: float) -> SimProgress:
        size = self.prompts.workload.size
        return SimProgress(t, self._sent, len(self.records), size, self.fleet.count("ready"), wall)

    def _busy(self) -> bool:
        return bool(self.flights) or not self.traffic.done

    def _schedule_traffic(self) -> None:
        """One pending traffic event at a time, at the traffic's next wake-up (earlier ones go stale)."""
        t = self.traffic.wake_at()
        if t is not None and t != self._traffic_at:
            self._traffic_at = t
            self.q.push(t, TRAFFIC)

    # -- requests ------------------------------------------------------------------------------------
    def _dispatch(self, sends: list[Send], now: float) -> None:
        for send in sends:
            self._send(send, now)

    def _send(self, send: Send, now: float) -> None:
        self._sent += 1
        spec = send.spec
        ids = self.prompts.ids(spec)
        rid = f"sim-{send.index}"
        rec = RequestRecord(index=send.index, stage=send.stage, scheduled_s=send.scheduled_s, sent_s=now,
                            input_tokens=len(ids), session=spec.session, group=spec.group)  # fmt: skip
        profile = self.cfg.profile
        if not ids or len(ids) + spec.max_tokens > profile.max_model_len:
            self.too_long += 1
            self._fail(send, rec, now, "http_status", 400,
                       f"HTTP 400: {len(ids)} prompt + {spec.max_tokens} output tokens exceed "
                       f"max_model_len {profile.max_model_len}")  # fmt: skip
            return
        bs = self.cfg.block_size
        hashes = self.prompts.hashes(spec, ids, bs, profile.model)
        info = RequestInfo(rid, profile.model, len(ids), hashes, bs,
                           max_tokens=spec.max_tokens)  # fmt: skip
        try:
            bid = self.router.route(info, spec.max_tokens, now)
        except NoBackendError as exc:
            self._fail(send, rec, now, "http_status", 503, f"HTTP 503: {exc.message}")
            return
        engine = self.by_id[bid]
        req = SimRequest(rid, ids, spec.max_tokens, now, seed=send.index)
        engine.inflight += 1
        self.flights[rid] = _Flight(send, rec, engine, len(ids), spec.max_tokens)
        delay = profile.request_overhead(len(ids))
        if delay > 0:
            # The API server's per-request work (tokenizing, setup) runs beside the engine core: the request
            # reaches the core later without stalling its batch. A WAKE whose payload is (engine, request).
            self.q.push(now + delay, WAKE, (engine, req))
        else:
            self._arrive(engine, req, now)

    def _arrive(self, engine: SimEngine, req: SimRequest, now: float) -> None:
        engine.core.add_request(req, now)
        engine.version += 1
        if not engine.stepping and (engine.wake_at is None or engine.wake_at > now):
            engine.wake_at = now
            self.q.push(now, WAKE, engine)

    def _fail(self, send: Send, rec: RequestRecord, now: float, error: str, status: int, detail: str) -> None:
        rec.error = error  # type: ignore[assignment]
        rec.status = status
        rec.error_detail = detail
        rec.end_s = now + REFUSAL_S
        self.records.append(rec)
        # The refusal reaches the client a round trip later; a closed loop sends its next request then (not
        # at once, which would recurse, and spin forever in a timed stage whose every request is refused).
        self.q.push(now + REFUSAL_S, REFUSED, send)

    def _time_out(self, t: float) -> None:
        for flight in self.flights.values():
            rec = flight.record
            rec.error, rec.end_s = "timeout", t
            rec.error_detail = f"still in flight when the simulation stopped at {t:.1f}s"
            self.records.append(rec)
        self.flights.clear()

    # -- engines -------------------------------------------------------------------------------------
    def _step(self, engine: SimEngine, now: float) -> None:
        core = engine.core
        while core.has_work():
            out = core.step(now)
            self.steps += 1
            engine.version += 1
            if out.duration > 0 or out.events or out.preempted:
                engine.stepping = True
                self.q.push(now + out.duration, STEP_END, (engine, out))
                return
            ready = core.next_ready_time()
            if ready is not None and ready > now:
                if engine.wake_at is None or ready < engine.wake_at:
                    engine.wake_at = ready
                    self.q.push(ready, WAKE, engine)
                return
            if ready is None and not core.has_work():
                break
            engine.stalls += 1
            if engine.stalls > 2:
                raise RuntimeError(f"engine {engine.id} stalled at t={now:.6f} with work left")
        self._maybe_stop(engine, now)

    def _step_end(self, engine: SimEngine, out: StepOutput, t: float) -> None:
        engine.stepping = False
        engine.stalls = 0
        flights, router, scaler = self.flights, self.router, self.scaler
        if out.kv_events:
            router.kv_events(engine.id, out.kv_events)
        ended: list[_Flight] = []
        for ev in out.events:
            flight = flights.get(ev.request_id)
            if flight is None:
                continue
            rec = flight.record
            if ev.new_tokens:
                rec.chunk_times.append(t)
                if not flight.got_first:
                    flight.got_first = True
                    rec.cached_tokens = ev.cached_tokens
                    router.first_token(engine.id, flight.prompt_tokens, ev.request_id)
                    if scaler is not None:
                        scaler.observe_ttft(t - rec.sent_s)
            if ev.finished:
                del flights[ev.request_id]
                rec.end_s = t
                rec.output_tokens = len(rec.chunk_times)
                if ev.finish_reason == "error":
                    rec.error, rec.status = "http_status", 400
                    rec.error_detail = "HTTP 400: the request can never fit the engine's KV cache"
                got = flight.got_first
                router.finish(engine.id, flight.prompt_tokens, flight.expected, ev.request_id, got_first=got)
                engine.inflight -= 1
                self.records.append(rec)
                ended.append(flight)
        for flight in ended:
            self._dispatch(self.traffic.finished(flight.send, t), t)
        if ended:
            self._schedule_traffic()
        self._step(engine, t)

    def _maybe_stop(self, engine: SimEngine, now: float) -> None:
        if engine.state == "draining" and engine.inflight == 0 and not engine.core.has_work():
            self.fleet.stop(engine, now)
            self.router.remove(engine)
            self._note_replicas(now)

    def _add_engine(self, now: float, startup_s: float) -> SimEngine:
        engine = self.fleet.add(now, startup_s)
        self.by_id[engine.id] = engine
        if engine.state == "ready":
            self.router.add(engine)
        else:
            self.q.push(engine.ready_at, READY, engine)
        return engine

    def _ready(self, engine: SimEngine, t: float) -> None:
        if engine.state != "starting":
            return  # cancelled while starting
        engine.state = "ready"
        self.router.add(engine)
        self._note_replicas(t)

    # -- scaling -------------------------------------------------------------------------------------
    def _scale(self, t: float) -> None:
        assert self.scaler is not None and self.cfg.autoscale is not None
        desired = self.scaler.decide(self.fleet, t)
        current = self.fleet.count("starting", "ready")
        if desired > current:
            for _ in range(desired - current):
                self._add_engine(t, self.cfg.autoscale.startup_s)
        elif desired < current:
            for engine in pick_removals(self.fleet, current - desired):
                if engine.state == "starting":
                    self.fleet.stop(engine, t)
                else:
                    engine.state = "draining"
                    self.router.drain(engine)
                    self._maybe_stop(engine, t)
        self._note_replicas(t)
        if self._busy():
            self.q.push(t + self.cfg.autoscale.interval_s, SCALE)

    def _note_replicas(self, t: float) -> None:
        f = self.fleet
        point = ReplicaPoint(t, f.count("starting", "ready"), f.count("ready"), f.count("draining"))
        last = self.replicas[-1] if self.replicas else None
        if last is None or (last.desired, last.ready, last.draining) != (point.desired, point.ready,
                                                                         point.draining):  # fmt: skip
            self.replicas.append(point)
