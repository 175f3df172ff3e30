"""The simulation proper: traffic -> router -> engines on one virtual clock (see ``simulate`` in ``run``).

Each engine follows the driving rule of :func:`infctl.sim.virtual.run_until_idle`, generalised to many cores
on one event heap: while it has work it calls ``step(now)`` and delivers the step's tokens at
``now + duration``, where the next step starts; a step that ran nothing waits for ``next_ready_time()``; an
idle engine is woken by the next request routed to it. Only engines with work are ever stepped, and the clock
jumps from event to event.

A disaggregated request (``SimConfig.pd``) runs two legs: the prefill leg (``max_tokens`` 1, id
``<id>/prefill``) on the prefill engine; when it finishes, the decode leg (``remote_prefill``) on the decode
engine, whose core allocates the prompt's blocks and waits for the KV over the pair's link (see ``pd``).
With admission control (``SimConfig.admission``) a request may wait in the router before either.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from infctl.bench.records import RequestRecord
from infctl.sim.cluster.admission import AdmissionRoom
from infctl.sim.cluster.config import SimConfig
from infctl.sim.cluster.events import (
    DEADLINE,
    READY,
    REFUSED,
    SCALE,
    SCRAPE,
    STEP_END,
    TRAFFIC,
    WAKE,
    EventQueue,
)
from infctl.sim.cluster.fleet import Fleet, SimEngine
from infctl.sim.cluster.flights import Flight, Pending, RequestFlow
from infctl.sim.cluster.prompts import PromptSource
from infctl.sim.cluster.routing import SimRouter
from infctl.sim.cluster.scaling import ReplicaPoint, Scaler, pick_removals
from infctl.sim.cluster.traffic import Traffic
from infctl.sim.types import StepOutput


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


class Simulation(RequestFlow):
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
        self.router = SimRouter(cfg.policy, cfg.pools, block_size=cfg.block_size)
        self.scaler = Scaler(cfg.autoscale) if cfg.autoscale is not None else None
        self.traffic = Traffic(prompts.specs(), cfg.load, cfg.seed)
        self.records: list[RequestRecord] = []
        self.replicas: list[ReplicaPoint] = []
        self.flights: dict[str, Flight] = {}
        self.by_id: dict[str, SimEngine] = {}
        self.steps = 0
        self.events = 0
        self.scrapes = 0
        self.too_long = 0
        """Requests refused because prompt + output exceed the profile's max_model_len."""
        self.pd_settings = cfg.pd.router_settings if cfg.pd is not None else None
        self.legs: dict[str, Flight] = {}
        """Prefill-leg id -> its request, while the leg runs."""
        self.pairs: dict[str, tuple[str | None, str, str]] = {}
        """PD runs: request id -> (prefill engine or None, decode engine, the router's reason)."""
        self.transfers: list[tuple[str, str, float]] = []
        """Decode legs sent: (prefill engine, decode engine, link GB/s)."""
        self.admission: AdmissionRoom[Pending] | None = None
        if cfg.admission is not None:
            self.admission = AdmissionRoom(cfg.admission, self.router.core.policy.settings)
        self.end_time = 0.0
        self._progress = progress
        self._progress_every = progress_interval_s
        self._sent = 0
        self._traffic_at: float | None = None

    # -- the loop ------------------------------------------------------------------------------------
    def run(self) -> None:
        cfg, q = self.cfg, self.q
        if cfg.pd is not None:
            for name, role, group in cfg.pd.engines():
                self._add_engine(0.0, 0.0, name=name, role=role, group=group)
        else:
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
            before = q.now
            t, kind, payload = pop()
            if kind == DEADLINE and (self.admission is None or not self.admission.holds(payload)):
                q.now = before  # released before its deadline: nothing happens then, the clock stays
                continue
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
                self._release(t)
                if self._busy():
                    q.push(t + cfg.scrape_interval_s, SCRAPE)
            elif kind == SCALE:
                self._scale(t)
            elif kind == DEADLINE:
                self._deadline(payload, t)
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
        if self.flights or (self.admission is not None and self.admission.waiting):
            self._time_out(limit if limit is not None else q.now)
        if self._progress is not None:
            self._progress(self.snapshot_progress(self.end_time, time.perf_counter() - wall0))

    def snapshot_progress(self, t: float, wall: float) -> SimProgress:
        size = self.prompts.workload.size
        return SimProgress(t, self._sent, len(self.records), size, self.fleet.count("ready"), wall)

    def _busy(self) -> bool:
        waiting = self.admission is not None and self.admission.waiting > 0
        return bool(self.flights) or waiting or not self.traffic.done

    def _schedule_traffic(self) -> None:
        """One pending traffic event at a time, at the traffic's next wake-up (earlier ones go stale)."""
        t = self.traffic.wake_at()
        if t is not None and t != self._traffic_at:
            self._traffic_at = t
            self.q.push(t, TRAFFIC)

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
        ended: list[Flight] = []
        for ev in out.events:
            flight = flights.get(ev.request_id)
            if flight is None:
                leg = self.legs.pop(ev.request_id, None) if ev.finished else None
                if leg is not None and not self._prefilled(leg, ev, t):
                    ended.append(leg)
                continue
            rec = flight.record
            if ev.new_tokens:
                rec.chunk_times.append(t)
                if not flight.got_first:
                    flight.got_first = True
                    rec.cached_tokens = flight.cached if flight.cached >= 0 else ev.cached_tokens
                    router.first_token(engine.id, flight.prompt_tokens, ev.request_id)
                    if scaler is not None:
                        scaler.observe_ttft(t - rec.sent_s)
            if ev.finished:
                error = ev.finish_reason == "error"
                self._end(
                    flight, t, "HTTP 400: the request can never fit the engine's KV cache" if error else ""
                )
                ended.append(flight)
        for flight in ended:
            self._release(t)  # as the live proxy wakes the admission queue when a request ends
            self._dispatch(self.traffic.finished(flight.send, t), t)
        if ended:
            self._schedule_traffic()
        self._step(engine, t)

    def _maybe_stop(self, engine: SimEngine, now: float) -> None:
        if engine.state == "draining" and engine.inflight == 0 and not engine.core.has_work():
            self.fleet.stop(engine, now)
            self.router.remove(engine)
            self._note_replicas(now)

    def _add_engine(self, now: float, startup_s: float, **placement: Any) -> SimEngine:
        engine = self.fleet.add(now, startup_s, **placement)
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
        waiting = self.admission.waiting if self.admission is not None else 0
        desired = self.scaler.decide(self.fleet, self.router, t, waiting)
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
