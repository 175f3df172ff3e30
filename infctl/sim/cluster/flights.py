"""A request's path through the router to its engine(s): admission, routing, the PD legs, its answer.

``RequestFlow`` is the request half of :class:`~infctl.sim.cluster.engine_loop.Simulation` (which adds the
loop, the engines' steps and scaling). A request is parsed into a :class:`Pending`; it waits in the admission
room while the fleet is saturated (when the run models admission), then the live router places it and it
becomes a :class:`Flight` until answered. A disaggregated request's prefill leg runs on its prefill engine
under the id ``<id>/prefill``; its end sends the decode leg (``_prefilled``).
"""

from __future__ import annotations

from infctl.bench.records import RequestRecord
from infctl.router.errors import NoBackendError
from infctl.router.kv_chain import HASH_SEED
from infctl.router.policies.pd import PDSettings
from infctl.router.snapshot import RequestInfo
from infctl.sim.cluster.admission import AdmissionRoom
from infctl.sim.cluster.config import SimConfig
from infctl.sim.cluster.events import DEADLINE, REFUSED, WAKE, EventQueue
from infctl.sim.cluster.fleet import SimEngine
from infctl.sim.cluster.prompts import PromptSource
from infctl.sim.cluster.routing import SimRouter
from infctl.sim.cluster.traffic import Send
from infctl.sim.types import SimRequest, TokenEvent

REFUSAL_S = 0.001
"""Seconds from sending a request the router or engine refuses (400, 503) to the client seeing the refusal."""


PREFILL_LEG = "/prefill"
"""Suffix of a disaggregated request's prefill-leg id on its prefill engine."""


class Pending:
    """A request the router has parsed but not routed yet (it may wait in the admission queue)."""

    __slots__ = ("info", "record", "req", "send")

    def __init__(self, send: Send, record: RequestRecord, req: SimRequest, info: RequestInfo) -> None:
        self.send = send
        self.record = record
        self.req = req
        self.info = info


class Flight:
    __slots__ = (
        "cached",
        "engine",
        "expected",
        "got_first",
        "prefill",
        "prompt_tokens",
        "record",
        "req",
        "send",
    )

    def __init__(self, send: Send, record: RequestRecord, engine: SimEngine, req: SimRequest):
        self.send = send
        self.record = record
        self.engine = engine
        """The engine that streams the answer (the decode engine of a PD pair)."""
        self.req = req
        self.prompt_tokens = len(req.prompt_ids)
        self.expected = req.max_tokens
        self.got_first = False
        self.prefill: SimEngine | None = None
        """A disaggregated request's prefill engine."""
        self.cached = -1
        """Prefix hit of its prefill leg (tokens), once that leg finished."""


class RequestFlow:
    """Requests from send to answer; the simulation owns the state declared here."""

    cfg: SimConfig
    prompts: PromptSource
    q: EventQueue
    router: SimRouter
    by_id: dict[str, SimEngine]
    records: list[RequestRecord]
    flights: dict[str, Flight]
    legs: dict[str, Flight]
    """Prefill-leg id -> its request, while the leg runs."""
    pairs: dict[str, tuple[str | None, str, str]]
    """PD runs: request id -> (prefill engine or None, decode engine, the router's reason)."""
    transfers: list[tuple[str, str, float]]
    """Decode legs sent after a prefill leg: (prefill engine, decode engine, link GB/s)."""
    admission: AdmissionRoom[Pending] | None
    pd_settings: PDSettings | None
    too_long: int
    _sent: int

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
        hashes = self.prompts.hashes(spec, ids, bs, HASH_SEED)
        info = RequestInfo(rid, profile.model, len(ids), hashes, bs,
                           max_tokens=spec.max_tokens)  # fmt: skip
        pending = Pending(send, rec, SimRequest(rid, ids, spec.max_tokens, now, seed=send.index), info)
        room = self.admission
        snap = self.router.pool.snapshot(now) if room is not None else None
        if room is not None and snap is not None and room.must_wait(snap):
            ticket = room.hold(pending, len(ids), for_backend=room.empty(snap))
            if ticket is None:
                self._refuse(pending, now, "admission_full")
            else:
                self.q.push(now + room.deadline_s(ticket), DEADLINE, ticket)
            return
        self._route(pending, now)

    def _route(self, p: Pending, now: float) -> None:
        info, req = p.info, p.req
        prefill: str | None = None
        try:
            if self.pd_settings is not None:
                pair = self.router.route_pd(info, req.max_tokens, now, self.pd_settings)
                prefill, bid = pair.prefill, pair.decode
                self.pairs[info.request_id] = (prefill, bid, pair.reason)
            else:
                bid = self.router.route(info, req.max_tokens, now)
        except NoBackendError as exc:
            self._fail(p.send, p.record, now, "http_status", 503, f"HTTP 503: {exc.message}")
            return
        engine = self.by_id[bid]
        engine.inflight += 1
        flight = self.flights[info.request_id] = Flight(p.send, p.record, engine, req)
        if prefill is None:
            self._deliver(engine, req, now)
            return
        flight.prefill = self.by_id[prefill]
        flight.prefill.inflight += 1
        leg = SimRequest(req.request_id + PREFILL_LEG, req.prompt_ids, 1, now, seed=req.seed)
        self.legs[leg.request_id] = flight
        self._deliver(flight.prefill, leg, now)

    def _deliver(self, engine: SimEngine, req: SimRequest, now: float) -> None:
        delay = self.cfg.profile.request_overhead(len(req.prompt_ids))
        if delay > 0:
            # The API server's per-request work (tokenizing, setup) runs beside the engine core: the request
            # reaches the core later without stalling its batch. A WAKE whose payload is (engine, request).
            self.q.push(now + delay, WAKE, (engine, req))
        else:
            self._arrive(engine, req, now)

    def _prefilled(self, flight: Flight, ev: TokenEvent, t: float) -> bool:
        """A prefill leg ended: send the decode leg, which pulls the KV over the pair's link (True), or
        answer the request with the leg's error (False)."""
        prefill = flight.prefill
        assert prefill is not None and self.cfg.pd is not None
        prefill.inflight -= 1
        self.router.prefill_done(prefill.id, len(flight.req.prompt_ids))
        if ev.finish_reason == "error":
            self._end(flight, t, "HTTP 400: the request can never fit the prefill engine's KV cache")
            return False
        flight.cached = ev.cached_tokens
        decode = flight.engine
        gbps = self.cfg.pd.link_gbps(self.cfg.profile, prefill.group, decode.group)
        req = flight.req
        self.transfers.append((prefill.id, decode.id, gbps))
        leg = SimRequest(req.request_id, req.prompt_ids, req.max_tokens, t, True, req.seed, gbps)
        self._deliver(decode, leg, t)
        return True

    def _release(self, now: float) -> None:
        """One waiting request, if the fleet has room again (the live router's ``AdmissionQueue.wake``)."""
        if self.admission is not None and self.admission.waiting:
            pending = self.admission.release(self.router.pool.snapshot(now))
            if pending is not None:
                self._route(pending, now)

    def _deadline(self, ticket: int, now: float) -> None:
        assert self.admission is not None
        pending = self.admission.expire(ticket)
        if pending is not None:
            self._refuse(pending, now, self.admission.refusal(ticket))

    def _refuse(self, p: Pending, now: float, reason: str) -> None:
        if reason == "no_backend_after_hold":
            detail = "HTTP 503: no backend appeared in time (the fleet is scaled to zero)"
            self._fail(p.send, p.record, now, "http_status", 503, detail)
            return
        self._fail(
            p.send, p.record, now, "http_status", 429, f"HTTP 429: all backends are saturated ({reason})"
        )

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
        recs = [f.record for f in self.flights.values()]
        recs += [p.record for p in self.admission.drain()] if self.admission is not None else []
        for rec in recs:
            rec.error, rec.end_s = "timeout", t
            rec.error_detail = f"still in flight when the simulation stopped at {t:.1f}s"
            self.records.append(rec)
        self.flights.clear()

    def _end(self, flight: Flight, t: float, error: str = "") -> None:
        """``flight`` is answered at ``t`` (``error``: with an HTTP 400 of that text)."""
        rec, engine, rid = flight.record, flight.engine, flight.req.request_id
        del self.flights[rid]
        rec.end_s = t
        rec.output_tokens = len(rec.chunk_times)
        if error:
            rec.error, rec.status, rec.error_detail = "http_status", 400, error
        got = flight.got_first
        self.router.finish(engine.id, flight.prompt_tokens, flight.expected, rid, got_first=got)
        engine.inflight -= 1
        self.records.append(rec)
