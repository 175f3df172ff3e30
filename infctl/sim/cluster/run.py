"""``simulate(config) -> SimResult``: the one entry point of the cluster simulator."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from infctl.bench.workloads import build_workload
from infctl.sim.cluster.config import SimConfig
from infctl.sim.cluster.engine_loop import ProgressFn, Simulation
from infctl.sim.cluster.prompts import prompt_source
from infctl.sim.cluster.result import SimResult, build_result


def simulate(cfg: SimConfig, *, progress: ProgressFn | None = None) -> SimResult:
    """Run ``cfg`` on the virtual clock and measure it as ``infctl bench`` would.

    Deterministic: the same config (seed included) gives the same result, whatever the machine. Files named
    by the workload are read and validated first (``ConfigError`` with ``file:line``). ``progress`` is
    called about twice a second of wall time with a :class:`SimProgress`.
    """
    workload = build_workload(cfg.workload, cfg.api, cfg.seed)
    sim = Simulation(cfg, prompt_source(workload), progress=progress)
    started = datetime.now(UTC)
    wall0 = time.perf_counter()
    sim.run()
    wall = time.perf_counter() - wall0
    finished = datetime.now(UTC)
    return build_result(
        cfg, sim, started.isoformat(timespec="seconds"), finished.isoformat(timespec="seconds"), wall
    )
