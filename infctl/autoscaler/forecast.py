"""Scaling ahead of demand (pure): the forecast term of infctl's policy.

Each decision sees the prompt tokens per second the router sent the engines over the last interval, less
those it expected cached (``ScalingSnapshot.demand``). From it the forecast keeps, in :class:`ForecastState`:

- a **level and a trend** (Holt's double exponential smoothing on the policy's clock, windows ``window_s``
  and ``trend_window_s``), and provisions for ``level + max(trend, 0) * lead_s``: the demand when a replica
  asked for now would serve (start-up compensation). Until it has a whole ``window_s`` of readings the
  policy only reacts. The level is a weighted mean of the readings so far: the first weighs as one
  reading, not as a whole window (seeded with a burst, it kept a third of it after a window);
- **staffing for the TTFT deadline**: ``R`` replicas' worth of demand (the forecast over one replica's
  prefill rate) needs ``ceil(R + headroom)`` replicas, a constant spare whatever the fleet. A TTFT SLO is
  many prefills long (2 s against ~0.2 s), and behind a deadline ``T`` that long the chance of waiting past
  it falls as ``exp(-(n - R) T / s)`` (``s`` a prefill; the Erlang C tail): the spare replicas, not their
  share, set how fast a burst's backlog drains, so keeping misses under a share needs about
  ``ln(1/share) * s / T`` spare replicas at any size (half a replica for 1% at 0.2 s and 2 s). The
  square-root rule (``R + headroom * sqrt(R)``, Halfin and Whitt) keeps the chance of waiting *at all*
  fixed; against a 2 s SLO it kept a third replica through a peak two carry (a static 2 met it);
- the **SLO term**: every interval whose TTFT p99 misses the SLO raises ``slo_scale`` (the headroom's
  multiplier) by ``slo_gain``; every one under half the SLO while the ready replicas carry at least 80% of
  the demand the plan gives them lowers it by a quarter of that, within ``min_slo_scale``..``max_slo_scale``:
  only a fleet running near its plan is evidence that less headroom is safe (an idle night is not);
- **panic mode** (AIBrix, Knative): when the demand over the last ``panic_window_s`` (at least the last two
  readings) is ``panic_factor`` times what the ready units are planned to carry and that far over the
  smoothed level before it, the fleet goes straight to what it needs, with no step limit, and does not
  scale down for ``panic_window_s``;
- a **scale-down floor**: the most units needed over the policy's ``down_window_s`` (as the HPA's
  stabilisation window), counted with a 20% tolerance (the units for 25% more demand), so neither a lull
  shorter than the window nor the demand's noise costs a replica that must start again: one removed takes
  its prefix cache with it, and one started serves cold after a start-up. The floor's demand is the
  **arrival rate** (smoothed as the level) **times the mean prompt** (over ``size_window_s``), not the token
  level: prompts are heavy-tailed (one of 129k tokens is 1.8 s of a DeepSeek-V3 engine), so the token rate
  swings with single prompts. On the simulator's days (24 seeds) the token level's maximum kept a replica
  through quiet evenings after one long prompt and, at a lull of long prompts under a steady arrival rate,
  released one at the peak. Over 24 seeds of ``simulate compare autoscaling`` the arrival rate took the
  business day from -46.0% GPU-hours and 59 SLO misses to -46.7% and 34, the consumer day from -38.9% and
  75 to -38.4% and 62; the spiky day's figures stayed within 0.1 points;
- with a warm forecast and a TTFT SLO, the policy judges the entry role's queue by its **drain time**
  (:func:`drain_queue_up`): a replica may hold as many waiting requests as it prefills in half the SLO.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from infctl.autoscaler.settings import ForecastConfig, PolicyConfig, UnitConfig
from infctl.autoscaler.snapshot import Demand, ForecastState, ScalingSnapshot

_EPS = 1e-9
GATE = 0.8
"""The SLO term lowers the headroom only while the replicas carry this share of their planned work or more."""
DOWN_TOLERANCE = 0.8
"""Scale down only to units that would still carry the demand over this share (20% to spare: a replica removed
and started again within minutes costs its start-up and its prefix cache; 0.9, the HPA's tolerance, let a
fleet release a replica at a peak's lull and start a cold one seconds later)."""
DRAIN_SHARE = 0.5
"""A queue is short enough while one replica prefills its share of it within this share of the TTFT SLO."""
MIN_PREFILL_S = 0.05
"""The least prefill time per request the drain rule assumes (an interval with no arrivals has no mean)."""


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
    """The spare replicas (``headroom`` after the SLO term)."""
    warm: bool = True
    """The forecast has seen demand for a whole ``window_s``; before that the policy only reacts."""


def staffed(work: float, headroom: float) -> int:
    """Replicas for ``work`` replicas' worth of demand: ``ceil(work + headroom)``, at least 1."""
    return max(1, math.ceil(max(work, 0.0) + headroom - _EPS))


def carried(replicas: int, headroom: float) -> float:
    """The most work ``replicas`` are planned to carry (the inverse of :func:`staffed`)."""
    return max(0.0, replicas - headroom)


def drain_queue_up(demand: Demand | None, fc: ForecastConfig, slo_s: float | None) -> float | None:
    """Waiting requests per replica of the entry role that one replica prefills within ``DRAIN_SHARE`` of the
    SLO, at the interval's mean uncached prompt (None without an SLO or a demand reading).

    The policy's ``queue_up`` counts requests whatever they cost: 2 per replica asked for a fourth engine at
    a burst two engines drained in under a second (0.2 s a prefill), and the fleet kept it."""
    if slo_s is None or demand is None:
        return None
    per_request = demand.prompt_tps / demand.requests_per_s if demand.requests_per_s > 0 else 0.0
    prefill_s = max(MIN_PREFILL_S, per_request / fc.replica_prompt_tps)
    return DRAIN_SHARE * slo_s / prefill_s


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
    state = _smooth(fc, memory, now, x, max(0.0, demand.requests_per_s))
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
    size = state.size_tokens / state.size_requests if state.size_requests > 0 else 0.0
    needs = (*kept, (now, staffed(state.requests * size / DOWN_TOLERANCE / full, headroom)))
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
        weight=state.weight,
        requests=state.requests,
        size_tokens=state.size_tokens,
        size_requests=state.size_requests,
    )
    warm = now - state.since >= fc.window_s - _EPS
    return Outlook(needed, hold, panic, ahead, headroom, warm), state


def _smooth(
    fc: ForecastConfig, memory: ForecastState | None, now: float, x: float, rps: float
) -> ForecastState:
    if memory is None:
        return ForecastState(
            at=now, since=now, level=x, recent=((now, x),), requests=rps, size_tokens=x, size_requests=rps
        )
    if memory.size_requests <= 0:
        # No request seen yet, or a record from before the arrival rate was kept: start from this reading.
        memory = replace(memory, requests=rps, size_tokens=x, size_requests=rps)
    dt = max(0.0, now - memory.at)
    a = 1 - math.exp(-dt / fc.window_s)
    b = 1 - math.exp(-dt / fc.trend_window_s)
    c = 1 - math.exp(-dt / fc.size_window_s)
    predicted = max(0.0, memory.level + memory.trend * dt)
    # A weighted mean of the readings so far: the first weighs as much as the next, not as a whole window.
    prior = (1 - a) * (memory.weight or a)
    weight = prior + a
    level = (prior * predicted + a * x) / weight if weight > 0 else x
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
        weight=weight,
        requests=memory.requests + a * (rps - memory.requests),
        size_tokens=memory.size_tokens + c * (x - memory.size_tokens),
        size_requests=memory.size_requests + c * (rps - memory.size_requests),
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
