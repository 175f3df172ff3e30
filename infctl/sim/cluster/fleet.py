"""The simulated engines: each an unchanged ``EngineCore``, with its life cycle and what it costs.

An engine is asked for at ``asked_at`` (GPU time counts from then), serves from ``ready_at`` (the startup
delay: weights load, warm-up), and when removed first drains: it takes no new requests, finishes those it
holds, and only then stops (GPU time ends there). Its router-visible signals are what the live engine would
export in /metrics at that moment, from the core's own ``stats()``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from infctl.sim.profiles import SimProfile
from infctl.sim.scheduler import EngineCore, Role
from infctl.telemetry.signals import EngineSignals

EngineState = Literal["starting", "ready", "draining", "stopped"]


@dataclass(eq=False, slots=True)
class SimEngine:
    """One engine in the fleet."""

    id: str
    core: EngineCore
    asked_at: float
    """When the fleet asked for it (virtual seconds)."""
    ready_at: float
    """When it starts serving."""
    state: EngineState = "starting"
    role: Role = "both"
    """PD role: ``both`` serves whole requests; ``prefill``/``decode`` are the halves of a PD pair."""
    group: str | None = None
    """PD group (one switch: the fast KV link); None outside a PD layout."""
    stopped_at: float | None = None
    stepping: bool = False
    """A step (or a wake-up for remote KV) is scheduled: new requests join the next step on their own."""
    wake_at: float | None = None
    """A wake-up is scheduled at this time (a new request, or remote KV arriving)."""
    stalls: int = 0
    """Steps in a row that ran nothing (more than two is a scheduler bug)."""
    inflight: int = 0
    """Requests routed to it and not finished."""
    queue_peak: float = 0.0
    """Highest queue, running count and KV usage its scrapes showed."""
    running_peak: float = 0.0
    kv_usage_peak: float = 0.0
    version: int = 0
    """Bumped whenever its state changes (a step, a new request): signals are rebuilt only then."""
    _signals: EngineSignals | None = field(default=None, repr=False)
    _signals_version: int = field(default=-1, repr=False)

    def signals(self) -> EngineSignals:
        """What a /metrics scrape of this engine reports now (cached while nothing changed)."""
        if self._signals is None or self._signals_version != self.version:
            s = self.core.stats()
            p = self.core.profile
            self._signals = EngineSignals(
                queue=s.waiting,
                running=s.running,
                kv_usage=s.kv_usage,
                prefix_queries=s.prefix_queries,
                prefix_hits=s.prefix_hits,
                prompt_tokens=s.prompt_tokens,
                generation_tokens=s.generation_tokens,
                preemptions=s.preemptions,
                cache_capacity_tokens=s.num_gpu_blocks * s.block_size,
                block_size=s.block_size,
                prefix_caching=p.enable_prefix_caching,
                model_names=(p.model,),
            )
            self._signals_version = self.version
            self.queue_peak = max(self.queue_peak, s.waiting)
            self.running_peak = max(self.running_peak, s.running)
            self.kv_usage_peak = max(self.kv_usage_peak, s.kv_usage)
        return self._signals


class Fleet:
    """Every engine the run ever had (stopped ones too: they count for GPU-hours and the server view)."""

    def __init__(
        self,
        profile: SimProfile,
        *,
        gpus_per_engine: int = 1,
        engine_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.profile = profile
        self.gpus_per_engine = gpus_per_engine
        self._options = dict(engine_options or {})
        self.engines: list[SimEngine] = []

    def add(
        self,
        now: float,
        startup_s: float = 0.0,
        *,
        name: str | None = None,
        role: Role = "both",
        group: str | None = None,
    ) -> SimEngine:
        """A new engine (``name`` defaults to ``e<index>``); a PD engine's remote-KV transfers each take
        their own link's bandwidth (``SimRequest.kv_transfer_gbps``)."""
        core = EngineCore(self.profile, role=role, **self._options)
        eid = name or f"e{len(self.engines)}"
        engine = SimEngine(eid, core, asked_at=now, ready_at=now + startup_s, role=role, group=group)
        if startup_s <= 0:
            engine.state = "ready"
        self.engines.append(engine)
        return engine

    def live(self) -> Iterator[SimEngine]:
        """Engines not stopped (starting, ready or draining)."""
        return (e for e in self.engines if e.state != "stopped")

    def count(self, *states: EngineState) -> int:
        return sum(1 for e in self.engines if e.state in states)

    def stop(self, engine: SimEngine, now: float) -> None:
        engine.state = "stopped"
        engine.stopped_at = now

    def gpu_seconds(self, end: float, start: float = 0.0) -> float:
        """GPU-seconds from each engine's ask to its stop (or ``end``), from ``start`` on."""
        total = 0.0
        for e in self.engines:
            stop = e.stopped_at if e.stopped_at is not None else end
            total += max(0.0, stop - max(e.asked_at, start))
        return total * self.gpus_per_engine
