"""Engines in named pools, for length bucketing: the router's ``buckets`` send each length to its pools.

The core simulator registers every engine as a backend without a pool. An arm that names pools runs the
same :class:`~infctl.sim.cluster.engine_loop.Simulation` with one difference: its router registers the i-th
engine with the i-th pool name, exactly as the live router's admin API does (``POST /admin/backends`` with
``{"url": ..., "pool": ...}``, what the demo's bucketing arm calls). Engines added later by an autoscaler
take the last pool named.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from infctl.bench.workloads import build_workload
from infctl.router.snapshot import Backend
from infctl.sim.cluster.config import SimConfig
from infctl.sim.cluster.engine_loop import ProgressFn, Simulation
from infctl.sim.cluster.fleet import SimEngine
from infctl.sim.cluster.prompts import prompt_source
from infctl.sim.cluster.result import SimResult, build_result
from infctl.sim.cluster.routing import SimRouter
from infctl.sim.cluster.run import simulate


class PooledRouter(SimRouter):
    """The simulator's router (the live ``RouterCore`` and ``BackendPool``) with engines placed in pools."""

    def __init__(self, policy: str | Mapping[str, Any], pools: Sequence[str | None]) -> None:
        super().__init__(policy)
        self._pools = list(pools)
        self._added = 0

    def add(self, engine: SimEngine) -> None:
        pool = self._pools[min(self._added, len(self._pools) - 1)]
        self._added += 1
        self.pool.add(Backend(id=engine.id, url=f"sim://{engine.id}", pool=pool))


def simulate_arm(
    cfg: SimConfig, pools: Sequence[str | None] = (), *, progress: ProgressFn | None = None
) -> SimResult:
    """:func:`~infctl.sim.cluster.simulate` itself when ``pools`` is empty; else the same run with the
    engines placed in ``pools`` (one name per engine at the start)."""
    if not pools:
        return simulate(cfg, progress=progress)
    workload = build_workload(cfg.workload, cfg.api, cfg.seed)
    sim = Simulation(cfg, prompt_source(workload), progress=progress)
    sim.router = PooledRouter(cfg.policy, pools)
    started = datetime.now(UTC)
    wall0 = time.perf_counter()
    sim.run()
    wall = time.perf_counter() - wall0
    finished = datetime.now(UTC)
    return build_result(
        cfg, sim, started.isoformat(timespec="seconds"), finished.isoformat(timespec="seconds"), wall
    )
