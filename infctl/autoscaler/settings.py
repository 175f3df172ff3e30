"""The policy's settings: units and bounds, thresholds, windows, cooldowns, steps, ratio band, schedules.

Every duration is in seconds of the policy's clock. Units are counted in units (groups in group mode).
Invalid settings raise :class:`~infctl.errors.ConfigError` when built, never later in a decision.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from infctl.autoscaler.schedule import ScheduleWindow
from infctl.config.settings import ScalingOptions
from infctl.errors import ConfigError

_FILE = ScalingOptions()
"""The thresholds' defaults, declared once with the file models (``infctl.config.settings``)."""


@dataclass(frozen=True, slots=True)
class UnitConfig:
    """One scalable unit."""

    name: str
    """``both``, ``prefill``, ``decode``, ``group``, or a Kubernetes target's name."""
    min: int
    """Fewest units; 0 only with ``scale_to_zero_after_s``."""
    max: int
    """Most units."""
    members: tuple[tuple[str, int], ...] = (("both", 1),)
    """Replicas per unit by role, e.g. ``(("decode", 1),)``; a group ``(("prefill", 1), ("decode", 2))``."""
    group: str | None = None
    """Only replicas of this PD group belong to the unit (per-group Kubernetes targets); None: any."""
    pool: str | None = None
    """Only replicas of this length pool belong to the unit (per-pool Kubernetes targets); None: any."""
    gpus: int = 1
    """GPUs one unit holds (all its replicas), for ``PolicyConfig.gpu_budget``."""
    scale_to_zero_after_s: float | None = None
    """Scale-to-zero (``min`` 0 only): after this many seconds with no request routed or waiting for the
    unit and none in its engines, remove every unit; from 0, add one as soon as the router holds a request
    for it. None: off (the unit never goes below ``max(min, 1)``)."""

    def per_unit(self, role: str) -> int:
        return dict(self.members).get(role, 0)

    @property
    def roles(self) -> tuple[str, ...]:
        return tuple(r for r, _ in self.members)


@dataclass(frozen=True, slots=True)
class ForecastConfig:
    """Scaling ahead of demand: units for the prompt tokens per second forecast ``lead_s`` ahead (see
    :mod:`infctl.autoscaler.forecast`)."""

    replica_prompt_tps: float
    """Uncached prompt tokens per second one replica of the entry role prefills at full use (the engine's
    measured or profiled prefill rate)."""
    headroom: float = 0.5
    """Spare replicas beyond the work: ``ceil(R + headroom)`` replicas for ``R`` replicas' worth of demand,
    whatever the fleet (staffing for a TTFT deadline many prefills long, where the spare replicas set how
    fast a backlog drains: about ``ln(1/share) * prefill / SLO`` keeps misses under a share). The SLO term
    scales it."""
    lead_s: float = 105.0
    """How far ahead to provision: an engine's start-up plus one decision interval."""
    window_s: float = 120.0
    """Smoothing of the demand's level (an exponential window)."""
    trend_window_s: float = 180.0
    """Smoothing of its trend."""
    size_window_s: float = 480.0
    """Smoothing of the mean prompt (uncached tokens per request) for the scale-down floor, which takes the
    arrival rate times it: several level windows, so one long prompt moves it little."""
    panic_window_s: float = 30.0
    """Panic mode (AIBrix/Knative): when the demand over this window is ``panic_factor`` times what the ready
    units are planned to carry (and over the smoothed level), scale to it at once, without step limits, and
    hold it this long."""
    panic_factor: float = 2.0
    slo_gain: float = 0.1
    """The SLO term: each interval whose TTFT p99 misses the SLO raises the headroom by this share; each
    under half the SLO while the replicas run near the plan lowers it by a quarter of that."""
    min_slo_scale: float = 0.25
    """The least headroom the SLO term leaves, as a share of ``headroom``."""
    max_slo_scale: float = 4.0
    """The most, as a share of ``headroom``."""

    def scaled(self, factor: float) -> ForecastConfig:
        return replace(
            self,
            lead_s=self.lead_s * factor,
            window_s=self.window_s * factor,
            trend_window_s=self.trend_window_s * factor,
            size_window_s=self.size_window_s * factor,
            panic_window_s=self.panic_window_s * factor,
        )

    def problems(self) -> list[str]:
        out = []
        if not (math.isfinite(self.replica_prompt_tps) and self.replica_prompt_tps > 0):
            out.append("forecast.replica_prompt_tps must be > 0")
        if not (math.isfinite(self.headroom) and self.headroom >= 0):
            out.append("forecast.headroom must be >= 0")
        if not 0 < self.min_slo_scale <= 1 <= self.max_slo_scale < math.inf:
            out.append("forecast: min_slo_scale must be in (0, 1] and max_slo_scale >= 1")
        durations = (self.lead_s, self.window_s, self.trend_window_s, self.panic_window_s)
        if any(not math.isfinite(x) or x < 0 for x in durations) or self.window_s <= 0:
            out.append("forecast durations must be >= 0 seconds (the window > 0)")
        if (
            self.trend_window_s <= 0
            or self.size_window_s <= 0
            or self.panic_factor <= 1
            or not 0 <= self.slo_gain < 1
        ):
            out.append(
                "forecast needs trend_window_s > 0, size_window_s > 0, panic_factor > 1 and 0 <= slo_gain < 1"
            )
        return out


@dataclass(frozen=True, slots=True)
class PolicyConfig:
    """How the policy turns signals into unit counts."""

    units: tuple[UnitConfig, ...]
    queue_up: float = _FILE.queue_per_replica.up
    """Scale up above this many waiting requests per ready replica (the file's ``queue_per_replica.up``)."""
    queue_down: float = _FILE.queue_per_replica.down
    """Scale down only below this many (and below ``kv_down``)."""
    kv_up: float = _FILE.kv_usage.up
    """Scale up above this mean KV-cache usage, 0..1 (the file's ``kv_usage.up``)."""
    kv_down: float = _FILE.kv_usage.down
    """Scale down only below this mean KV-cache usage."""
    ttft_slo_s: float | None = None
    """Scale the entry role up while the router's TTFT p99 exceeds this; None ignores TTFT."""
    ttft_down: float = 0.5
    """With a TTFT SLO, scale down only while TTFT p99 is under this fraction of it."""
    up_window_s: float = 0.0
    """A scale-up signal must hold this long first (0: up fast)."""
    down_window_s: float = 300.0
    """A scale-down signal must hold this long first (stabilisation)."""
    up_cooldown_s: float = 30.0
    """After any change, wait this long before scaling up again."""
    down_cooldown_s: float = 120.0
    """After any change, wait this long before scaling down."""
    max_step_up: int = 4
    """Most units added by one decision."""
    max_step_down: int = 1
    """Most units removed by one decision."""
    ratio: tuple[float, float] | None = None
    """Band of prefill replicas per decode replica, ``(low, high)``, kept between prefill and decode units."""
    schedules: tuple[ScheduleWindow, ...] = field(default=())
    """Time-of-day floors (see :mod:`infctl.autoscaler.schedule`)."""
    forecast: ForecastConfig | None = None
    """Scale the entry role ahead of demand (infctl's policy); None: react to queue, KV and TTFT only."""
    gpu_budget: int | None = None
    """Most GPUs all units may hold together; over it, the planner divides the budget by each unit's load
    (:func:`~infctl.autoscaler.planner.fit_budget`). None: only each unit's ``max``."""

    def __post_init__(self) -> None:
        problems = [*_threshold_problems(self), *_unit_problems(self), *_budget_problems(self)]
        if self.forecast is not None:
            problems += self.forecast.problems()
        if problems:
            raise ConfigError("autoscaler: " + "; ".join(problems))
        for p, d in ratio_pairs(self):
            if not _ratio_feasible(p, d, self.ratio):
                raise ConfigError(
                    f"autoscaler: no {p.name}:{d.name} counts within bounds fit the ratio band {self.ratio}",
                    hint="widen the ratio band or the prefill/decode bounds",
                )

    @property
    def entry_role(self) -> str:
        """The role the router's queue and TTFT count against: prefill when there is one, else both."""
        return "prefill" if any("prefill" in u.roles for u in self.units) else "both"

    def unit(self, name: str) -> UnitConfig:
        return next(u for u in self.units if u.name == name)

    def scaled(self, factor: float) -> PolicyConfig:
        """The same policy with every duration multiplied by ``factor`` (a fast simulated clock)."""
        return replace(
            self,
            units=tuple(
                u
                if u.scale_to_zero_after_s is None
                else replace(u, scale_to_zero_after_s=u.scale_to_zero_after_s * factor)
                for u in self.units
            ),
            up_window_s=self.up_window_s * factor,
            down_window_s=self.down_window_s * factor,
            up_cooldown_s=self.up_cooldown_s * factor,
            down_cooldown_s=self.down_cooldown_s * factor,
            forecast=None if self.forecast is None else self.forecast.scaled(factor),
        )


def ratio_pairs(config: PolicyConfig) -> list[tuple[UnitConfig, UnitConfig]]:
    """(prefill unit, decode unit) pairs the ratio band holds between (same group, one role each)."""
    if config.ratio is None:
        return []
    prefill = [u for u in config.units if u.roles == ("prefill",)]
    decode = [u for u in config.units if u.roles == ("decode",)]
    return [(p, d) for p in prefill for d in decode if p.group == d.group]


def in_band(prefill: int, decode: int, band: tuple[float, float]) -> bool:
    # A hair of tolerance so that 1/3 written as 0.3333 still admits 1 prefill per 3 decode.
    return decode > 0 and band[0] - 1e-9 <= prefill / decode <= band[1] + 1e-9


def _ratio_feasible(p: UnitConfig, d: UnitConfig, band: tuple[float, float] | None) -> bool:
    assert band is not None
    return any(
        in_band(np * p.per_unit("prefill"), nd * d.per_unit("decode"), band)
        for np in range(p.min, p.max + 1)
        for nd in range(d.min, d.max + 1)
    )


def _threshold_problems(c: PolicyConfig) -> list[str]:
    problems = []
    if not 0 <= c.queue_down < c.queue_up:
        problems.append(f"queue thresholds need 0 <= down < up, got down {c.queue_down:g} up {c.queue_up:g}")
    if not 0 <= c.kv_down < c.kv_up <= 1:
        problems.append(f"kv_usage thresholds need 0 <= down < up <= 1, got {c.kv_down:g}/{c.kv_up:g}")
    durations = (c.up_window_s, c.down_window_s, c.up_cooldown_s, c.down_cooldown_s)
    if any(not math.isfinite(x) or x < 0 for x in durations):
        problems.append("windows and cooldowns must be >= 0 seconds")
    if c.max_step_up < 1 or c.max_step_down < 1:
        problems.append("max steps must be >= 1")
    if c.ttft_slo_s is not None and c.ttft_slo_s <= 0:
        problems.append("ttft_slo_s must be > 0")
    if not 0 < c.ttft_down <= 1:
        problems.append(f"ttft_down is a fraction of the SLO in (0, 1], got {c.ttft_down:g}")
    if c.ratio is not None and not 0 < c.ratio[0] <= c.ratio[1]:
        problems.append(f"ratio band needs 0 < low <= high, got {c.ratio}")
    return problems


def _budget_problems(c: PolicyConfig) -> list[str]:
    if c.gpu_budget is None:
        return []
    floor = sum(u.min * u.gpus for u in c.units)
    if floor > c.gpu_budget:
        return [f"gpu_budget {c.gpu_budget} is below the units' minimums ({floor} GPUs)"]
    return []


def _unit_problems(c: PolicyConfig) -> list[str]:
    problems = []
    names = [u.name for u in c.units]
    if len(set(names)) != len(names):
        problems.append(f"unit names repeat: {names}")
    for u in c.units:
        if not 0 <= u.min <= u.max or u.max < 1:
            problems.append(
                f"{u.name}: bounds need 0 <= min <= max and max >= 1, got min {u.min} max {u.max}"
            )
        idle = u.scale_to_zero_after_s
        if (u.min == 0) != (idle is not None):
            problems.append(f"{u.name}: min 0 and scale_to_zero_after_s go together (the idle window)")
        elif idle is not None and not (math.isfinite(idle) and idle > 0):
            problems.append(f"{u.name}: scale_to_zero_after_s must be > 0 seconds")
        if not u.members or any(n < 1 for _, n in u.members):
            problems.append(f"{u.name}: needs at least one replica per unit")
        if u.gpus < 1:
            problems.append(f"{u.name}: gpus must be >= 1")
    return problems
