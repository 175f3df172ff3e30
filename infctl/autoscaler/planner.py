"""Dividing a fixed GPU budget among pools by their measured demand (pure).

A *pool* is anything the autoscaler sizes as one: a length bucket's engines, a prefill or decode role, whole
PD groups. Its demand is what it must serve per second, prompt tokens to prefill (uncached) and output tokens
to decode, and one replica serves ``replica_prefill_tps`` and ``replica_decode_tps`` of them at full use, so
the pool's load is ``prompt_tps / replica_prefill_tps + decode_tps / replica_decode_tps`` replicas of work.

:func:`plan_pools` gives every pool its minimum, then hands the rest of the budget out one replica at a time
to the pool whose replicas would otherwise be the busiest (highest load per replica). Handing out replicas
greedily this way minimises the busiest pool's utilisation, which is what bounds its queueing, and so its
TTFT; a pool at its maximum, or one whose replica costs more GPUs than are left, is passed over. A pool with
no demand keeps its minimum.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from infctl.errors import ConfigError


@dataclass(frozen=True, slots=True)
class PoolDemand:
    """One pool: what it must serve, what one replica serves, what a replica costs, and its bounds."""

    name: str
    prompt_tps: float
    """Prompt tokens per second the pool must prefill (uncached), measured."""
    decode_tps: float
    """Output tokens per second the pool must decode, measured."""
    replica_prefill_tps: float
    """Prompt tokens per second one replica prefills at full use."""
    replica_decode_tps: float
    """Output tokens per second one replica decodes at its working batch."""
    gpus_per_replica: int = 1
    min: int = 1
    """Fewest replicas."""
    max: int | None = None
    """Most replicas; None: only the budget bounds it."""

    def __post_init__(self) -> None:
        rates = (self.prompt_tps, self.decode_tps)
        if any(not math.isfinite(x) or x < 0 for x in rates):
            raise ConfigError(f"pool {self.name}: demand must be finite and >= 0, got {rates}")
        if not (self.replica_prefill_tps > 0 and self.replica_decode_tps > 0):
            raise ConfigError(f"pool {self.name}: a replica's capacities must be > 0")
        if self.gpus_per_replica < 1 or self.min < 0 or (self.max is not None and self.max < self.min):
            raise ConfigError(f"pool {self.name}: needs gpus_per_replica >= 1 and 0 <= min <= max")

    @property
    def load(self) -> float:
        """Replicas' worth of work the demand is."""
        return self.prompt_tps / self.replica_prefill_tps + self.decode_tps / self.replica_decode_tps


@dataclass(frozen=True, slots=True)
class PoolPlan:
    """Replicas per pool, in the order the pools were given."""

    replicas: tuple[tuple[str, int], ...]
    utilization: tuple[tuple[str, float], ...]
    """Each pool's load over its replicas (inf for load on zero replicas)."""
    gpus: int
    """GPUs the plan uses (at most the budget)."""

    def counts(self) -> dict[str, int]:
        return dict(self.replicas)


def plan_pools(pools: Sequence[PoolDemand], gpu_budget: int) -> PoolPlan:
    """Replicas per pool within ``gpu_budget`` GPUs, by demand (see the module). ConfigError when the pools'
    minimums alone exceed the budget, or two pools share a name."""
    names = [p.name for p in pools]
    if len(set(names)) != len(names):
        raise ConfigError(f"planner: pool names repeat: {names}")
    counts = [p.min for p in pools]
    used = sum(n * p.gpus_per_replica for n, p in zip(counts, pools, strict=True))
    if used > gpu_budget:
        raise ConfigError(
            f"planner: the pools' minimums need {used} GPUs, the budget is {gpu_budget}",
            hint="raise the budget or lower the pools' minimums",
        )
    while True:
        best, key = -1, (-math.inf, 0.0)
        for i, p in enumerate(pools):
            if p.max is not None and counts[i] >= p.max:
                continue
            if used + p.gpus_per_replica > gpu_budget or p.load <= 0:
                continue
            # Busiest per replica first; among equals the one whose next replica relieves it most.
            k = (_per_replica(p.load, counts[i]), p.load / (counts[i] + 1))
            if k > key:
                best, key = i, k
        if best < 0:
            break
        counts[best] += 1
        used += pools[best].gpus_per_replica
    return PoolPlan(
        replicas=tuple(zip(names, counts, strict=True)),
        utilization=tuple((p.name, _per_replica(p.load, n)) for p, n in zip(pools, counts, strict=True)),
        gpus=used,
    )


def fit_budget(
    wanted: Mapping[str, int], loads: Mapping[str, float], pools: Sequence[PoolDemand], gpu_budget: int
) -> dict[str, int]:
    """``wanted`` replicas per pool when they fit ``gpu_budget``; else the budget divided by ``loads``
    (replicas' worth of work per pool), never giving a pool more than it wanted."""
    cost = sum(wanted.get(p.name, 0) * p.gpus_per_replica for p in pools)
    if cost <= gpu_budget:
        return dict(wanted)
    capped = [
        PoolDemand(
            p.name,
            prompt_tps=max(0.0, loads.get(p.name, 0.0)),
            decode_tps=0.0,
            replica_prefill_tps=1.0,
            replica_decode_tps=1.0,
            gpus_per_replica=p.gpus_per_replica,
            min=min(p.min, wanted.get(p.name, p.min)),
            max=wanted.get(p.name, p.min),
        )
        for p in pools
    ]
    return plan_pools(capped, gpu_budget).counts()


def _per_replica(load: float, n: int) -> float:
    if n > 0:
        return load / n
    return math.inf if load > 0 else 0.0
