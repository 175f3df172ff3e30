"""The autoscaler daemon: each interval observe, read signals, decide, log, export and (unless dry-run) scale.

``serve(cfg, actuator, *, ready=None, stop=None)`` runs until ``stop``; ``run`` is the sync wrapper that owns
the event loop and stops on SIGINT/SIGTERM. A failed step (an unreachable router, a refused scale) is
logged and counted in ``infctl_autoscaler_errors_total``; the next tick tries again. Each observation also
times the replicas a scale-up asked for until they are ready (:mod:`infctl.autoscaler.startup`; a restart or
a readiness blip is not timed), against the router's hold for units that may scale to 0. With a memory store
(``AutoscalerConfig.memory``) the policy's memory is saved after every decision and restored at start-up
(:mod:`infctl.autoscaler.memory`): a restart keeps the cooldowns and a warm forecast.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import httpx

from infctl.autoscaler.fleet import Actuator, Fleet
from infctl.autoscaler.memory import BadMemory, record, restore, startups
from infctl.autoscaler.memory_store import MemoryStore
from infctl.autoscaler.metrics import AutoscalerMetrics, direction
from infctl.autoscaler.policy import desired_replicas
from infctl.autoscaler.promql import PrometheusSource, query_signals
from infctl.autoscaler.server import MetricsServer
from infctl.autoscaler.settings import PolicyConfig
from infctl.autoscaler.signals import (
    Buckets,
    RouterReading,
    demand_between,
    read_router,
    router_backends,
    scrape_replicas,
)
from infctl.autoscaler.snapshot import (
    Decision,
    Demand,
    ReplicaSignals,
    ScalerState,
    ScalingSnapshot,
    UnitStatus,
)
from infctl.autoscaler.startup import Ledger, asked, observed, over_hold
from infctl.config.autoscaler import AutoscalerFile
from infctl.config.router import ADMIN_TOKEN_ENV
from infctl.config.settings import ScalingOptions
from infctl.engines import DEFAULT_ENGINE, get_adapter
from infctl.errors import InfctlError
from infctl.telemetry import make_client

log = logging.getLogger(__name__)

OnDecision = Callable[[Decision, ScalingSnapshot], None]


@dataclass(frozen=True)
class AutoscalerConfig:
    """Everything ``serve`` needs besides the actuator."""

    policy: PolicyConfig
    engine: str = DEFAULT_ENGINE
    """Engine adapter for scraping replicas (metric names)."""
    interval_s: float = ScalingOptions.model_fields["interval_s"].default
    """Seconds between decisions (default: the file's ``interval_s``)."""
    dry_run: bool = ScalingOptions.model_fields["dry_run"].default
    """Log and export recommendations; never scale."""
    router_url: str | None = None
    """The router whose queue and TTFT count; None: the one the actuator reports, if any."""
    prometheus: PrometheusSource | None = None
    """Read engine signals from Prometheus instead of scraping the replicas the actuator lists."""
    host: str = AutoscalerFile.model_fields["host"].default
    """Listen address of /metrics and /health (default: autoscaler.yaml's default)."""
    port: int | None = AutoscalerFile.model_fields["port"].default
    """Port of /metrics and /health; None serves nothing (tests, one-shot runs)."""
    hold_when_empty_s: float | None = None
    """How long the router holds a request while a unit is at 0 (its ``hold_when_empty_s``, wall seconds):
    a unit that may scale to 0 and starts slower is logged and flagged (``startup_over_hold``). None: not
    known, nothing checked."""
    memory: MemoryStore | None = None
    """Where the policy's memory is kept between restarts; None: every start is cold."""


class _Daemon:
    def __init__(self, cfg: AutoscalerConfig, actuator: Actuator, client: httpx.AsyncClient) -> None:
        self.cfg, self.actuator, self.client = cfg, actuator, client
        self.adapter = get_adapter(cfg.engine)
        self.metrics = AutoscalerMetrics(cfg.dry_run)
        self.metrics.hold_s = cfg.hold_when_empty_s
        self.state = ScalerState()
        self.ledgers: dict[str, Ledger] = {}
        """unit -> replicas asked for and not ready yet, and recent start-ups."""
        self.may_zero = {u.name for u in cfg.policy.units if u.min == 0}
        self.warned: set[str] = set()
        self.router_buckets: Buckets | None = None
        self.router_counts: tuple[float, tuple[float, float, float]] | None = None
        """(when, the router's counters) at the last reading, for the demand."""
        self.memory_error: str | None = None
        """The last failed save's message (said once until it changes or a save works)."""

    async def recall(self, now: float, wall: float) -> str:
        """Restore the memory an earlier run of the daemon saved, if any and readable (else start cold);
        returns what happened, in a sentence."""
        store = self.cfg.memory
        assert store is not None
        try:
            data = await store.load()
        except InfctlError as err:
            self._failed("memory", err)
            return f"memory: cannot read {store.where}; starting cold"
        if data is None:
            said = f"memory: nothing saved in {store.where} yet; starting cold"
            log.info("%s", said)
            return said
        fc = self.cfg.policy.forecast
        try:
            self.state, gap = restore(data, now, wall, None if fc is None else fc.window_s)
            self.ledgers = {unit: Ledger(recent=times) for unit, times in startups(data).items()}
        except BadMemory as err:
            self.metrics.errors["memory"] += 1
            said = f"memory in {store.where} not used ({err}); starting cold"
            log.warning("%s", said)
            return said
        warm = [u for u, s in self.state.units if s.forecast is not None]
        kept = (", ".join(warm) or "none") if fc is not None else "none (no forecast)"
        said = (
            f"memory: restored {len(self.state.units)} unit(s) from {store.where}, saved {gap:.0f} s ago; "
            f"forecast kept for {kept}"
        )
        log.info("%s", said)
        return said

    async def remember(self, now: float, wall: float) -> None:
        if self.cfg.memory is None:
            return
        try:
            times = {unit: ledger.recent for unit, ledger in self.ledgers.items() if ledger.recent}
            await self.cfg.memory.save(record(self.state, now, wall, times))
        except InfctlError as err:
            # Counted every time, said once per cause: a missing ConfigMap would warn every interval.
            self.metrics.errors["memory"] += 1
            if err.message != self.memory_error:
                log.warning("memory failed: %s (scaling goes on; a restart will start cold)", err.message)
            self.memory_error = err.message
            self.metrics.memory_saved = False
        else:
            self.memory_error = None
            self.metrics.memory_saved = True

    async def tick(self, now: float, time_of_day: float, on_decision: OnDecision | None) -> Decision | None:
        try:
            fleet = await self.actuator.observe()
        except InfctlError as err:
            self._failed("observe", err)
            return None
        self._startups(fleet.units, now)
        replicas = await self._signals(fleet)
        reading, demand = await self._router(self.cfg.router_url or fleet.router_url, now)
        queue, ttft = (0.0, None) if reading is None else (reading.queue, reading.ttft_p99_s)
        snap = ScalingSnapshot(
            now=now,
            replicas=replicas,
            router_queue=queue,
            ttft_p99_s=ttft,
            time_of_day_s=time_of_day,
            demand=demand,
            router_pool_queue=() if reading is None else reading.pool_queue,
        )
        decision = desired_replicas(snap, fleet.units, self.cfg.policy, self.state)
        self.state = decision.state
        self.metrics.record(decision, time.time(), queue, ttft)
        for rec in decision.recommendations:
            inputs = " ".join(f"{k}={v:.3g}" for k, v in rec.inputs)
            log.info(
                "%s %s: %d -> %d (%s) %s",
                "recommend" if self.cfg.dry_run else "decide",
                rec.role,
                rec.current,
                rec.desired,
                rec.reason,
                inputs,
            )
        if on_decision is not None:
            on_decision(decision, snap)
        if not self.cfg.dry_run:
            await self._apply(decision, now)
        return decision

    def _startups(self, units: Mapping[str, UnitStatus], now: float) -> None:
        """Start-ups that ended since the last observation, checked against the router's hold."""
        hold = self.cfg.hold_when_empty_s
        for unit, status in units.items():
            ledger, samples = observed(self.ledgers.get(unit, Ledger()), status, now)
            self.ledgers[unit] = ledger
            self.metrics.started(unit, samples, ledger)
            if hold is None or unit not in self.may_zero:
                continue
            over = self.metrics.over_hold[unit] = over_hold(ledger, hold)
            if over and unit not in self.warned:
                self.warned.add(unit)
                log.warning(
                    "startup over hold %s: startup_s=%.0f hold_when_empty_s=%g: the first request after "
                    "it scales to 0 gets a 503; raise scale_to_zero.hold_s above the start-up or keep min: 1",
                    unit,
                    ledger.longest,
                    hold,
                )

    async def _signals(self, fleet: Fleet) -> tuple[ReplicaSignals, ...]:
        router = self.cfg.router_url or fleet.router_url
        try:
            if self.cfg.prometheus is not None:
                return await query_signals(self.client, self.cfg.prometheus, self.adapter)
            if not fleet.replicas and router is not None:
                return await router_backends(self.client, router, os.environ.get(ADMIN_TOKEN_ENV))
            replicas, errors = await scrape_replicas(self.client, fleet.replicas, self.adapter)
        except InfctlError as err:
            self._failed("signals", err)
            return ()
        for failure in errors:
            self._failed("signals", failure)
        return replicas

    async def _router(self, url: str | None, now: float) -> tuple[RouterReading | None, Demand | None]:
        if url is None:
            return None, None
        try:
            reading = await read_router(self.client, url, self.router_buckets)
        except InfctlError as err:
            self._failed("router", err)
            return None, None
        self.router_buckets = reading.buckets
        last, self.router_counts = self.router_counts, (now, reading.counts)
        demand = None if last is None else demand_between(last[1], reading.counts, now - last[0])
        return reading, demand

    async def _apply(self, decision: Decision, now: float) -> None:
        for rec in decision.recommendations:
            if not rec.changed:
                continue
            try:
                await self.actuator.scale(rec.role, rec.desired)
            except InfctlError as err:
                self._failed("scale", err)
                continue
            self.metrics.scaled[(rec.role, direction(rec))] += 1
            self.ledgers[rec.role] = asked(self.ledgers.get(rec.role, Ledger()), rec.desired, now)

    def _failed(self, stage: str, err: InfctlError) -> None:
        self.metrics.errors[stage] += 1
        log.warning("%s failed: %s", stage, err.message)


async def serve(
    cfg: AutoscalerConfig,
    actuator: Actuator,
    *,
    ready: asyncio.Event | None = None,
    stop: asyncio.Event | None = None,
    on_decision: OnDecision | None = None,
    on_listening: Callable[[str | None], None] | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    clock: Callable[[], float] = time.monotonic,
    time_of_day: Callable[[], float] | None = None,
    wall: Callable[[], float] = time.time,
    on_recall: Callable[[str], None] | None = None,
) -> None:
    """Decide every ``cfg.interval_s`` until ``stop`` is set; ``ready`` is set once /metrics listens, and
    ``on_listening`` is given its URL (the port bound: ``port: 0`` picks one), or None without a server.
    ``wall`` (the wall clock) dates the saved memory; ``clock`` is the policy's. ``on_recall`` is told, in
    a sentence, whether the memory was restored (only with ``cfg.memory``)."""
    stop = stop or asyncio.Event()
    day = time_of_day or _local_time_of_day
    async with make_client(transport) as client:
        daemon = _Daemon(cfg, actuator, client)
        server = None if cfg.port is None else await MetricsServer.start(cfg.host, cfg.port, daemon.metrics)
        try:
            if on_listening is not None:
                on_listening(None if server is None else server.url)
            if ready is not None:
                ready.set()
            if cfg.memory is not None:  # after /health answers: a slow API server must not fail the pod
                said = await daemon.recall(clock(), wall())
                if on_recall is not None:
                    on_recall(said)
            while not stop.is_set():
                now = clock()
                if await daemon.tick(now, day(), on_decision) is not None:
                    await daemon.remember(now, wall())
                waiter = asyncio.ensure_future(stop.wait())
                try:
                    await asyncio.wait({waiter}, timeout=cfg.interval_s)
                finally:  # also when cancelled: a waiter left pending is destroyed with ``stop``
                    waiter.cancel()
        finally:
            if server is not None:
                await server.close()


def run(
    cfg: AutoscalerConfig,
    actuator: Actuator,
    *,
    on_decision: OnDecision | None = None,
    on_listening: Callable[[str | None], None] | None = None,
    on_recall: Callable[[str], None] | None = None,
) -> None:
    """Run the daemon in the foreground until SIGINT or SIGTERM (the sync entry point)."""

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await serve(
            cfg,
            actuator,
            stop=stop,
            on_decision=on_decision,
            on_listening=on_listening,
            on_recall=on_recall,
        )

    asyncio.run(main())


def _local_time_of_day() -> float:
    t = time.localtime()
    return t.tm_hour * 3600 + t.tm_min * 60 + t.tm_sec
