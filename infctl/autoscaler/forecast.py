"""Scaling ahead of demand (pure): the forecast term of infctl's policy.

Each decision sees the prompt tokens per second the router sent the engines over the last interval, less
those it expected cached (``ScalingSnapshot.demand``). From it the forecast keeps, in :class:`ForecastState`:

- a **level and a trend** (Holt's double exponential smoothing on the policy's clock, windows ``window_s``
  and ``trend_window_s``), and provisions for ``level + max(trend, 0) * lead_s``: the demand when a replica
  asked for now would serve (start-up compensation). Until it has a whole ``window_s`` of readings the
  policy only reacts;
- **square-root staffing** (Halfin and Whitt): ``R`` replicas' worth of demand (the forecast over one
  replica's prefill rate) needs ``ceil(R + headroom * sqrt(R))`` replicas, so one replica at night keeps a
  large share spare and a big fleet a small one, as queueing needs;
- the **SLO term**: every interval whose TTFT p99 misses the SLO raises ``slo_scale`` (the headroom's
  multiplier) by ``slo_gain``; every one under half the SLO while the ready replicas carry at least 80% of
  the demand the plan gives them lowers it by a quarter of that, within ``min_slo_scale``..``max_slo_scale``:
  only a fleet running near its plan is evidence that less headroom is safe (an idle night is not);
- **panic mode** (AIBrix, Knative): when the demand over the last ``panic_window_s`` (at least the last two
  readings) is ``panic_factor`` times what the ready units are planned to carry and that far over the
  smoothed level before it, the fleet goes straight to what it needs, with no step limit, and does not
  scale down for ``panic_window_s``;
- a **scale-down floor**: the most units needed over the policy's ``down_window_s`` (as the HPA's
  stabilisation window), counted with a 10% tolerance (the units for 10% more demand), so neither a lull
  shorter than the window nor the demand's noise costs a replica that must start again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from infctl.autoscaler.settings import ForecastConfig, PolicyConfig, UnitConfig
from infctl.autoscaler.snapshot import ForecastState, ScalingSnapshot

_EPS = 1e-9
GATE = 0.8
"""The SLO term lowers the headroom only while the replicas carry this share of their planned work or more."""
DOWN_TOLERANCE = 0.9
"""Scale down only to units that would still carry the demand over this share (the HPA's 10% tolerance)."""


@dataclass(frozen=True, slots=True)
class Outlook:
    """What the forecast asks of one unit."""

    needed: int
    """Units for the demand forecast ``lead_s`` ahead."""
    hold: int
    """No scale-down below this many units (the down window's most needed, or the panic's)."""
    panic: int | None
    """In panic mode: units the spike needs now."""
    forecast_tps: float
    headroom: float
    """The square-root staffing headroom after the SLO term."""
    warm: bool = True
    """The forecast has seen demand for a whole ``window_s``; before that the policy only reacts."""


def staffed(work: float, headroom: float) -> int:
    """Replicas for ``work`` replicas' worth of demand: ``ceil(work + headroom * sqrt(work))``, at least 1."""
    return max(1, math.ceil(work + headroom * math.sqrt(max(work, 0.0)) - _EPS))


def carried(replicas: int, headroom: float) -> float:
    """The most work ``replicas`` are planned to carry (the inverse of :func:`staffed`)."""
    root = (-headroom + math.sqrt(headroom * headroom + 4 * replicas)) / 2
    return root * root


def outlook(
    snap: ScalingSnapshot,
    unit: UnitConfig,
    ready: int,
    config: PolicyConfig,
    memory: ForecastState | None,
) -> tuple[Outlook, ForecastState] | None:
    """The forecast for ``unit`` (None when the policy does not forecast, the unit does not serve the entry
    role, or no demand was read) and the forecast's next memory."""
    fc, demand = config.forecast, snap.demand
    if fc is None or demand is None or config.entry_role not in unit.roles:
        return None
    now, x = snap.now, max(0.0, demand.prompt_tps)
    state = _smooth(fc, memory, now, x)
    full = fc.replica_prompt_tps * unit.per_unit(config.entry_role)
    near_plan = state.level / full >= GATE * carried(max(ready, 1), fc.headroom * state.slo_scale)
    scale = _slo_scale(fc, state.slo_scale, config.ttft_slo_s, snap.ttft_p99_s, near_plan)
    headroom = fc.headroom * scale
    ahead = max(state.level, state.level + state.trend * fc.lead_s)
    needed = staffed(ahead / full, headroom)
    recent = tuple((t, r) for t, r in state.recent if t > now - fc.panic_window_s - _EPS)
    if len(recent) < 2:
        recent = state.recent[-2:]
    spike = sum(r for _, r in recent) / len(recent)
    spike_units = staffed(spike / full, headroom)
    panic_until = state.panic_until
    panic = None
    over_plan = spike / full >= fc.panic_factor * carried(max(ready, 1), headroom) * (1 - _EPS)
    before = state.level if memory is None else memory.level
    if over_plan and spike >= fc.panic_factor * before * (1 - _EPS):
        panic_until = now + fc.panic_window_s
    if panic_until is not None and now < panic_until + _EPS:
        panic = max(needed, spike_units)
    else:
        panic_until = None
    kept = [(t, n) for t, n in state.needs if t > now - config.down_window_s - _EPS]
    needs = (*kept, (now, staffed(ahead / DOWN_TOLERANCE / full, headroom)))
    hold = max(n for _, n in needs)
    if panic is not None:
        hold = max(hold, panic)
    state = ForecastState(
        at=now,
        since=state.since,
        level=state.level,
        trend=state.trend,
        slo_scale=scale,
        panic_until=panic_until,
        needs=needs,
        recent=recent,
    )
    warm = now - state.since >= fc.window_s - _EPS
    return Outlook(needed, hold, panic, ahead, headroom, warm), state


def _smooth(fc: ForecastConfig, memory: ForecastState | None, now: float, x: float) -> ForecastState:
    if memory is None:
        return ForecastState(at=now, since=now, level=x, recent=((now, x),))
    dt = max(0.0, now - memory.at)
    a = 1 - math.exp(-dt / fc.window_s)
    b = 1 - math.exp(-dt / fc.trend_window_s)
    predicted = max(0.0, memory.level + memory.trend * dt)
    level = predicted + a * (x - predicted)
    slope = (level - memory.level) / dt if dt > 0 else memory.trend
    trend = memory.trend + b * (slope - memory.trend)
    return ForecastState(
        at=now,
        since=memory.since,
        level=level,
        trend=trend,
        slo_scale=memory.slo_scale,
        panic_until=memory.panic_until,
        needs=memory.needs,
        recent=(*memory.recent, (now, x)),
    )


def _slo_scale(
    fc: ForecastConfig,
    scale: float,
    slo: float | None,
    ttft: float | None,
    near_plan: bool,
) -> float:
    if slo is None or ttft is None:
        return scale
    if ttft > slo:
        return min(fc.max_slo_scale, scale * (1 + fc.slo_gain))
    if ttft < slo / 2 and near_plan:
        return max(fc.min_slo_scale, scale * (1 - fc.slo_gain / 4))
    return scale
