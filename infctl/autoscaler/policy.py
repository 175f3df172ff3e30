"""The scaling decision: signals, current counts, settings and memory -> desired counts with reasons (pure).

Per unit, with ``n`` ready units (pending ones are never capacity):

- **high** when a role's queue per replica or KV usage is over its ``up`` level, or the router's TTFT p99 is
  over the SLO (entry role). After ``up_window_s`` of high and ``up_cooldown_s`` since the last change, and
  only when nothing is pending, scale up to the count the load needs, at least one and at most
  ``max_step_up`` more.
- **low** when every role is under both ``down`` levels (and TTFT meets the SLO). After ``down_window_s`` of
  low and ``down_cooldown_s``, remove up to ``max_step_down`` units, but never below the count the load
  needs: a scale-down never lands in a scale-up, so a constant signal cannot flap.
- with a forecast (``PolicyConfig.forecast``, :mod:`~infctl.autoscaler.forecast`), once it is warm and
  with a TTFT SLO, the entry role's queue is high over what one replica prefills in half the SLO
  (:func:`~infctl.autoscaler.forecast.drain_queue_up`) rather than over ``queue_up``; the entry role also
  scales up at once (pending replicas counted: they serve by then) to what the demand forecast one start-up
  ahead needs, and goes straight to what a spike needs in panic mode. It scales down only when both agree:
  the signals have been low for ``down_window_s`` and the demand of that window needs fewer units (never
  below the most it needed). Once the forecast is warm, a TTFT p99 over the SLO while the queue is under
  ``queue_down``, or drains within half the SLO, is not a scale-up signal (nobody waited long: a long
  prompt's own prefill, which more replicas do not shorten, or a burst already drained); the forecast's SLO
  term answers it by raising the headroom, and it still blocks scale-down.
- a unit that may scale to zero (``min`` 0, ``scale_to_zero_after_s``) goes to 0 after that long idle and
  back to 1 (or what the forecast needs) once the router holds a request for it
  (:mod:`~infctl.autoscaler.zero`).
- then schedule floors, ``min``/``max``, the prefill:decode ratio band and the GPU budget (the planner's
  :func:`~infctl.autoscaler.planner.fit_budget`), in that order.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

from infctl.autoscaler.forecast import DRAIN_SHARE, Outlook, drain_queue_up, outlook
from infctl.autoscaler.load import UnitLoad, unit_load
from infctl.autoscaler.planner import PoolDemand, fit_budget
from infctl.autoscaler.ratio import fit_band
from infctl.autoscaler.schedule import schedule_floor
from infctl.autoscaler.settings import PolicyConfig, UnitConfig, ratio_pairs
from infctl.autoscaler.snapshot import (
    Decision,
    Recommendation,
    ScalerState,
    ScalingSnapshot,
    Unit,
    UnitState,
    UnitStatus,
)
from infctl.autoscaler.zero import scale_to_zero, waiting_for


@dataclass(frozen=True, slots=True)
class _Proposal:
    unit: UnitConfig
    status: UnitStatus
    desired: int
    reason: str
    floor: int
    memory: UnitState
    inputs: tuple[tuple[str, float], ...]
    load: float = 0.0
    """Units' worth of work the signals show (for the GPU budget)."""


def desired_replicas(
    snapshot: ScalingSnapshot, current: Mapping[Unit, UnitStatus], config: PolicyConfig, state: ScalerState
) -> Decision:
    """One decision for every unit ``current`` reports (units it does not know are left alone)."""
    proposals = {
        u.name: _bounded(_propose(snapshot, u, current[u.name], config, state.of(u.name)), snapshot, config)
        for u in config.units
        if u.name in current
    }
    for p_unit, d_unit in ratio_pairs(config):
        p, d = proposals.get(p_unit.name), proposals.get(d_unit.name)
        if p is None or d is None or config.ratio is None:
            continue
        fitted = fit_band((p.desired, d.desired), (p_unit, d_unit), config.ratio, (p.floor, d.floor))
        band = f"ratio band {config.ratio[0]:g}-{config.ratio[1]:g} prefill:decode"
        for prop, n in ((p, fitted[0]), (d, fitted[1])):
            if n != prop.desired:
                proposals[prop.unit.name] = replace(prop, desired=n, reason=f"{band}; {prop.reason}")
    if config.gpu_budget is not None:
        _fit_budget(proposals, config.gpu_budget)
    recommendations, memory = [], state
    for prop in proposals.values():
        memory = memory.with_unit(prop.unit.name, _remember(prop, snapshot.now))
        recommendations.append(
            Recommendation(prop.unit.name, prop.status.desired, prop.desired, prop.reason, prop.inputs)
        )
    return Decision(tuple(recommendations), memory)


def _propose(
    snap: ScalingSnapshot, unit: UnitConfig, status: UnitStatus, config: PolicyConfig, memory: UnitState
) -> _Proposal:
    n, base, now = status.ready, status.desired, snap.now
    zero = None if unit.scale_to_zero_after_s is None else scale_to_zero(snap, unit, status, memory)
    if zero is not None:
        memory = zero.memory
    load = unit_load(snap, unit, n, config)
    ahead = outlook(snap, unit, n, config, memory.forecast)
    slo, ttft = config.ttft_slo_s, snap.ttft_p99_s
    drain = None
    if ahead is not None and ahead[0].warm and config.forecast is not None:
        # A queue is judged by the time the replicas take to prefill it, not by its count of requests.
        drain = drain_queue_up(snap.demand, config.forecast, slo)
    needed = load.needed(config, drain) if load.known else base
    ttft_high, ttft_ok = False, True
    if slo is not None and ttft is not None and config.entry_role in unit.roles:
        ttft_high, ttft_ok = ttft > slo, ttft <= config.ttft_down * slo
        if ahead is not None and ahead[0].warm and load.queue_per_replica(n) < config.queue_down:
            # Nobody waits: the miss is a long prompt's own prefill, which more replicas do not shorten.
            # The forecast's SLO term raises the headroom for it instead; the miss still blocks scale-down.
            ttft_high = False
        elif drain is not None and load.known and needed <= n:
            # Requests wait, but the ready replicas prefill the queue within half the SLO: the miss was a
            # burst already drained, or a long prompt; the same answer as above.
            ttft_high = False
    high = ttft_high or (load.known and n > 0 and n < needed)
    low = load.known and n > 0 and not high and ttft_ok and load.is_low(n, config)
    settled = now if memory.pending and not status.pending else memory.settled_at
    memory = replace(
        memory,
        high_since=(now if memory.high_since is None else memory.high_since) if high else None,
        low_since=(now if memory.low_since is None else memory.low_since) if low else None,
        pending=status.pending > 0,
        settled_at=settled,
    )
    since_change = math.inf if memory.last_scale_at is None else now - memory.last_scale_at
    since_ready = since_change if settled is None else min(since_change, now - settled)
    target, reason = base, "within thresholds"
    if not load.known and not ttft_high:
        reason = "no signals from ready replicas"
    elif high:
        why = _why_high(load, n, config, ttft if ttft_high else None, drain)
        assert memory.high_since is not None
        held = now - memory.high_since
        if status.pending:
            reason = f"{why}, but {status.pending} pending: no new scale-up until they are ready"
        elif held < config.up_window_s:
            reason = f"{why} for {held:.0f}s of the {config.up_window_s:g}s window"
        elif since_ready < config.up_cooldown_s:
            reason = f"{why}; cooling down ({since_ready:.0f}s of {config.up_cooldown_s:g}s)"
        else:
            # Latency is not proportional to replicas, but scaling by the overshoot (as the HPA does for any
            # metric) climbs a steep ramp in few steps; max_step_up bounds the guess.
            wanted = max(needed, math.ceil(n * ttft / slo - 1e-9)) if ttft_high and ttft and slo else needed
            target = min(base + config.max_step_up, max(base + 1, wanted))
            reason = f"{why}: the load needs {wanted}"
    elif low:
        why = (
            f"queue/replica {load.queue_per_replica(n):.2f} < {config.queue_down:g} and "
            f"KV {load.kv_usage(n):.0%} < {config.kv_down:.0%}"
        )
        assert memory.low_since is not None
        held = now - memory.low_since
        if status.pending:
            reason = f"{why}, but {status.pending} pending"
        elif held < config.down_window_s:
            reason = f"{why} for {held:.0f}s of the {config.down_window_s:g}s window"
        elif since_change < config.down_cooldown_s:
            reason = f"{why}; cooling down ({since_change:.0f}s of {config.down_cooldown_s:g}s)"
        elif max(base - config.max_step_down, needed) >= base:
            reason = f"{why}, but the load needs {needed}"
        else:
            target = max(base - config.max_step_down, needed)
            reason = f"{why} for {held:.0f}s"
    elif not ttft_ok and load.known and n > 0 and load.is_low(n, config):
        reason = f"queue and KV are low, but TTFT p99 {ttft:.2f}s is over {config.ttft_down:g} x the SLO"
    extra: tuple[tuple[str, float], ...] = ()
    if ahead is not None:
        view, fstate = ahead
        memory = replace(memory, forecast=fstate)
        quiet = low and memory.low_since is not None and now - memory.low_since >= config.down_window_s
        target, reason = _ahead(view, target, reason, base, (high or ttft_high, quiet), since_change, config)
        extra = (
            ("forecast_prompt_tps", view.forecast_tps),
            ("forecast_needed", float(view.needed)),
            ("forecast_headroom", view.headroom),
        )
        needed = max(needed, view.needed)
    if zero is not None and zero.desired is not None:
        target, reason = (zero.desired, zero.reason) if zero.desired == 0 else (max(target, 1), zero.reason)
        extra = (*extra, ("held_for_unit", waiting_for(snap, unit)))
    inputs = (
        ("ready", float(n)),
        ("pending", float(status.pending)),
        ("needed", float(needed)),
        ("queue_per_replica", load.queue_per_replica(n)),
        ("kv_usage", load.kv_usage(n)),
        ("router_queue", snap.router_queue),
        ("ttft_p99_s", ttft if ttft is not None else math.nan),
        *extra,
    )
    return _Proposal(unit, status, target, reason, 0, memory, inputs, float(max(needed, n, 1)))


def _ahead(
    view: Outlook,
    target: int,
    reason: str,
    base: int,
    signals: tuple[bool, bool],
    since_change: float,
    config: PolicyConfig,
) -> tuple[int, str]:
    """The reactive proposal (``target``) amended by the forecast; ``signals``: (high, low) now."""
    high, quiet = signals
    if not view.warm:
        return target, reason
    if view.panic is not None and view.panic > max(target, base):
        return view.panic, f"panic: a spike needs {view.panic} now"
    if view.needed > max(target, base):
        n = min(base + config.max_step_up, view.needed)
        return n, f"forecast {view.forecast_tps:.0f} prompt tok/s needs {view.needed}"
    if target > base or high:
        return target, reason
    if view.hold < base and since_change >= config.down_cooldown_s and quiet:
        n = max(base - config.max_step_down, view.hold)
        return n, f"the demand of the last {config.down_window_s:g}s needs {view.hold}"
    if target < base:  # the queue is low but the forecast still needs them
        return base, f"forecast needs {view.hold} (held over {config.down_window_s:g}s)"
    return target, reason


def _fit_budget(proposals: dict[str, _Proposal], budget: int) -> None:
    pools = [PoolDemand(p.unit.name, 0.0, 0.0, 1.0, 1.0, p.unit.gpus, p.unit.min, p.unit.max)
             for p in proposals.values()]  # fmt: skip
    wanted = {name: p.desired for name, p in proposals.items()}
    loads = {name: p.load for name, p in proposals.items()}
    fitted = fit_budget(wanted, loads, pools, budget)
    for name, n in fitted.items():
        prop = proposals[name]
        if n != prop.desired:
            why = f"GPU budget {budget} shared by load"
            proposals[name] = replace(prop, desired=n, reason=f"{why}; {prop.reason}")


def _bounded(prop: _Proposal, snap: ScalingSnapshot, config: PolicyConfig) -> _Proposal:
    unit = prop.unit
    floor, window = schedule_floor(config.schedules, unit.name, snap.time_of_day_s)
    low = max(unit.min, min(floor, unit.max))
    target, reason = prop.desired, prop.reason
    if target < low:
        why = f"schedule {window}" if window is not None and floor > unit.min else f"min {unit.min}"
        target, reason = low, f"{why}; {reason}"
    elif target > unit.max:
        target, reason = unit.max, f"capped at max {unit.max}; {reason}"
    return replace(prop, desired=target, reason=reason, floor=low)


def _remember(prop: _Proposal, now: float) -> UnitState:
    memory = prop.memory
    if prop.desired > prop.status.desired:
        return replace(memory, last_scale_at=now, high_since=None)
    if prop.desired < prop.status.desired:
        return replace(memory, last_scale_at=now, low_since=None)
    return memory


def _why_high(load: UnitLoad, n: int, config: PolicyConfig, ttft: float | None, drain: float | None) -> str:
    if ttft is not None:
        return f"TTFT p99 {ttft:.2f}s > SLO {config.ttft_slo_s:g}s"
    qpr, kv = load.queue_per_replica(n), load.kv_usage(n)
    if drain is not None and qpr > drain:
        return f"queue/replica {qpr:.2f} > {drain:.1f} (what one prefills in {DRAIN_SHARE:g} x the SLO)"
    if drain is None and qpr > config.queue_up:
        return f"queue/replica {qpr:.2f} > {config.queue_up:g}"
    return f"KV {kv:.0%} > {config.kv_up:.0%}"


def replicas_by_role(desired: Mapping[Unit, int], config: PolicyConfig) -> dict[str, int]:
    """Engine replicas per role that ``desired`` unit counts amount to (a group brings all its members)."""
    totals: dict[str, int] = {}
    for unit in config.units:
        for role, per_unit in unit.members:
            totals[role] = totals.get(role, 0) + desired.get(unit.name, 0) * per_unit
    return totals
