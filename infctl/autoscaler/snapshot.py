"""The records the policy reads and returns: frozen, plain, the same in the daemon, the benchmark and tests.

A *unit* is what the autoscaler counts and moves: one engine replica of a role (``both``, ``prefill``,
``decode``) or, in group mode, a whole PD group (``group``: P prefill + D decode replicas).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

Unit = str
"""``both``, ``prefill``, ``decode``, ``group``, or a Kubernetes target's name."""


@dataclass(frozen=True, slots=True)
class ReplicaSignals:
    """One engine replica as last observed."""

    name: str
    """Process name, pod name, or URL."""
    role: str
    """The engine's role: both, prefill or decode."""
    group: str | None = None
    """PD group (``g0``) in group mode, else None."""
    ready: bool = True
    """Serving and registered; unready or pending replicas are never counted as capacity."""
    queue: float = 0.0
    """Requests waiting in the engine."""
    running: float = 0.0
    """Requests in the running batch."""
    kv_usage: float = 0.0
    """KV-cache usage, 0..1."""
    pool: str | None = None
    """The length pool it serves (``infctl.io/pool``), else None."""


@dataclass(frozen=True, slots=True)
class Demand:
    """What reached the router over the last interval (its request and prompt-token counters)."""

    requests_per_s: float
    prompt_tps: float
    """Prompt tokens per second the engines must compute: routed less those expected cached."""


@dataclass(frozen=True, slots=True)
class ScalingSnapshot:
    """Everything observed at one decision time."""

    now: float
    """Seconds on the policy's clock (monotonic in the daemon, virtual in the benchmark)."""
    replicas: tuple[ReplicaSignals, ...] = ()
    router_queue: float = 0.0
    """Requests held by the router's admission control (counted against the entry role: prefill or both)."""
    ttft_p99_s: float | None = None
    """The router's TTFT p99 over the last interval, seconds; None when unknown or no request finished."""
    time_of_day_s: float | None = None
    """Local seconds after midnight, for schedules; None disables schedules."""
    demand: Demand | None = None
    """Arrivals over the last interval, for the forecast; None when unknown (the first reading)."""
    router_pool_queue: tuple[tuple[str, float], ...] = ()
    """Requests held by the router's admission control per length pool they wait for (a request that may
    run in several pools counts in each): what wakes a pool scaled to zero, whose engines report nothing."""


@dataclass(frozen=True, slots=True)
class UnitStatus:
    """What the actuator reports for one unit (the Kubernetes /scale view)."""

    desired: int
    """Units asked for (spec.replicas)."""
    ready: int
    """Units serving; a group is ready only when all of its replicas are."""

    @property
    def pending(self) -> int:
        return max(0, self.desired - self.ready)


@dataclass(frozen=True, slots=True)
class Recommendation:
    """The policy's answer for one unit."""

    role: Unit
    current: int
    """Units asked for before this decision."""
    desired: int
    """Units to ask for now."""
    reason: str
    inputs: tuple[tuple[str, float], ...] = ()
    """What the decision saw (queue per replica, KV usage, ready, pending, needed...) for logs and metrics."""

    @property
    def changed(self) -> bool:
        return self.desired != self.current


@dataclass(frozen=True, slots=True)
class ForecastState:
    """The forecast's memory (see :mod:`infctl.autoscaler.forecast`)."""

    at: float
    """When it last saw demand (policy seconds)."""
    since: float
    """When it first saw demand."""
    level: float
    """Smoothed prompt tokens per second."""
    trend: float = 0.0
    """Its smoothed change, prompt tokens per second per second."""
    slo_scale: float = 1.0
    """The SLO term: the headroom's multiplier, raised while TTFT misses the SLO."""
    panic_until: float | None = None
    """Panic mode (a spike): no scale-down before this."""
    needs: tuple[tuple[float, int], ...] = ()
    """(time, units needed) over the scale-down window: the forecast never scales below their maximum."""
    recent: tuple[tuple[float, float], ...] = ()
    """(time, prompt tokens per second) read over the panic window."""
    weight: float = 0.0
    """The level's smoothing weight so far (0 after the first reading, towards 1 after a window)."""
    requests: float = 0.0
    """Smoothed requests per second (the level's window)."""
    size_tokens: float = 0.0
    """Prompt tokens per second smoothed over ``size_window_s``: over ``size_requests``, the mean prompt."""
    size_requests: float = 0.0
    """Requests per second smoothed over ``size_window_s``."""


@dataclass(frozen=True, slots=True)
class UnitState:
    """Per-unit memory the policy keeps between decisions."""

    high_since: float | None = None
    """Since when the unit has been continuously over a scale-up threshold."""
    low_since: float | None = None
    """Since when it has been continuously under every scale-down threshold."""
    last_scale_at: float | None = None
    """When the policy last changed the unit's count (cooldowns count from here)."""
    pending: bool = False
    """Whether replicas were pending at the last decision."""
    settled_at: float | None = None
    """When the last pending replicas became ready: scale-up cooldowns count from here too, so the new
    capacity shows in the signals before more is added."""
    forecast: ForecastState | None = None
    """The forecast's memory, when the policy forecasts."""
    recommendations: tuple[tuple[float, int], ...] = ()
    """Threshold policy: (time, count) recommended over its scale-down stabilisation window."""
    idle_since: float | None = None
    """Scale-to-zero: since when nothing has been routed to, waiting for or running in the unit."""


@dataclass(frozen=True, slots=True)
class ScalerState:
    """The policy's whole memory, passed in and returned (never mutated)."""

    units: tuple[tuple[Unit, UnitState], ...] = ()

    def of(self, unit: Unit) -> UnitState:
        return next((s for u, s in self.units if u == unit), UnitState())

    def with_unit(self, unit: Unit, state: UnitState) -> ScalerState:
        rest = tuple((u, s) for u, s in self.units if u != unit)
        return replace(self, units=(*rest, (unit, state)))


@dataclass(frozen=True, slots=True)
class Decision:
    """One decision: a recommendation per unit and the policy's next state."""

    recommendations: tuple[Recommendation, ...]
    state: ScalerState

    def desired(self) -> dict[Unit, int]:
        return {r.role: r.desired for r in self.recommendations}
