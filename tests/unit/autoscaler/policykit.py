"""Helpers for policy tests: configs per mode and a tiny world where decisions take effect."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from infctl.autoscaler.policy import desired_replicas
from infctl.autoscaler.settings import PolicyConfig, UnitConfig
from infctl.autoscaler.snapshot import (
    Decision,
    ReplicaSignals,
    ScalerState,
    ScalingSnapshot,
    UnitStatus,
)


def aggregated(lo: int = 1, hi: int = 10, **kw: Any) -> PolicyConfig:
    return PolicyConfig(units=(UnitConfig("both", lo, hi),), **kw)


def pool(p: tuple[int, int] = (1, 8), d: tuple[int, int] = (1, 8), **kw: Any) -> PolicyConfig:
    units = (
        UnitConfig("prefill", *p, members=(("prefill", 1),)),
        UnitConfig("decode", *d, members=(("decode", 1),)),
    )
    return PolicyConfig(units=units, **kw)


def grouped(per_group: tuple[int, int] = (1, 2), bounds: tuple[int, int] = (1, 6), **kw: Any) -> PolicyConfig:
    members = (("prefill", per_group[0]), ("decode", per_group[1]))
    return PolicyConfig(units=(UnitConfig("group", *bounds, members=members),), **kw)


def fleet(config: PolicyConfig, counts: Mapping[str, int], **signals: float) -> tuple[ReplicaSignals, ...]:
    """Ready replicas for ``counts`` units, every one showing the same ``signals`` (queue, kv_usage...)."""
    out = []
    for unit in config.units:
        for role, per_unit in unit.members:
            out += [
                ReplicaSignals(f"{unit.name}-{role}-{i}", role, **signals)
                for i in range(counts.get(unit.name, 0) * per_unit)
            ]
    return tuple(out)


def decide(
    config: PolicyConfig,
    counts: Mapping[str, int],
    *,
    now: float = 1000.0,
    state: ScalerState | None = None,
    ready: Mapping[str, int] | None = None,
    router_queue: float = 0.0,
    ttft: float | None = None,
    tod: float | None = None,
    **signals: float,
) -> Decision:
    ready = counts if ready is None else ready
    snap = ScalingSnapshot(
        now=now,
        replicas=fleet(config, ready, **signals),
        router_queue=router_queue,
        ttft_p99_s=ttft,
        time_of_day_s=tod,
    )
    current = {u: UnitStatus(desired=n, ready=ready[u]) for u, n in counts.items()}
    return desired_replicas(snap, current, config, state or ScalerState())


Signals = Callable[[str, str, Mapping[str, int]], dict[str, float]]
"""(unit, role, counts) -> one replica's signals."""


def run(
    config: PolicyConfig,
    start: Mapping[str, int],
    signals: Signals,
    *,
    ticks: int = 60,
    interval: float = 15.0,
) -> list[dict[str, int]]:
    """Decide every ``interval`` seconds; decisions take effect at once (ready next tick). The counts seen."""
    counts, state, seen = dict(start), ScalerState(), [dict(start)]
    for t in range(ticks):
        replicas = tuple(
            ReplicaSignals(f"{u.name}-{role}-{i}", role, **signals(u.name, role, counts))
            for u in config.units
            for role, per_unit in u.members
            for i in range(counts[u.name] * per_unit)
        )
        snap = ScalingSnapshot(now=t * interval, replicas=replicas)
        current = {u: UnitStatus(n, n) for u, n in counts.items()}
        decision = desired_replicas(snap, current, config, state)
        state, counts = decision.state, {**counts, **decision.desired()}
        seen.append(dict(counts))
    return seen
