"""``serve``: N simulated engines on consecutive ports, each one :class:`~infctl.sim.app.SimInstance` (or a
data-parallel :class:`~infctl.sim.dp.DPEngine`), until stopped or every one has crashed.

The step loop that runs each engine's core in scaled real time is :mod:`infctl.sim.driver`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from infctl.errors import EngineError
from infctl.sim.app import Shared, SimInstance
from infctl.sim.dp import DPEngine
from infctl.sim.settings import SimSettings

log = logging.getLogger(__name__)


class SimCluster:
    """N simulated engines on consecutive ports, sharing one clock and one SGLang bootstrap registry.

    ``cfg.data_parallel_size`` above 1 makes each engine a :class:`~infctl.sim.dp.DPEngine` of that many
    ranks behind its one port (vLLM ``--data-parallel-size``, SGLang ``--dp-size``)."""

    def __init__(self, cfg: SimSettings) -> None:
        self.cfg = cfg
        shared = Shared.for_settings(cfg)
        self.clock = shared.clock
        self.registry = shared.registry
        self.tokenizer = shared.tokenizer
        engine = SimInstance if cfg.data_parallel_size == 1 else DPEngine
        self.instances: list[SimInstance | DPEngine] = [engine(cfg, i, shared) for i in range(cfg.instances)]

    @property
    def urls(self) -> list[str]:
        return [inst.url for inst in self.instances]

    async def start(self) -> None:
        try:
            for inst in self.instances:
                await inst.start()
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        await asyncio.gather(*(inst.stop() for inst in self.instances), return_exceptions=True)

    async def wait(self, stop: asyncio.Event | None) -> bool:
        """Until ``stop`` is set (True) or every instance has crashed (False)."""

        async def all_crashed() -> bool:
            for inst in self.instances:
                await inst.crashed.wait()
            return True

        waiters = [asyncio.create_task(all_crashed())]
        if stop is not None:
            waiters.append(asyncio.create_task(stop.wait()))
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waiters:
                w.cancel()
            await asyncio.gather(*waiters, return_exceptions=True)
        return not all(inst.crashed.is_set() for inst in self.instances)


async def serve(
    cfg: SimSettings,
    *,
    ready: asyncio.Event | None = None,
    stop: asyncio.Event | None = None,
    on_ready: Callable[[SimCluster], None] | None = None,
) -> None:
    """Run the engines until ``stop`` is set; raises EngineError when every instance crashed (``--fault``)."""
    started = time.monotonic()
    cluster = SimCluster(cfg)
    try:
        await cluster.start()
        log.info(
            "%d simulated %s engine(s) up in %.2fs",
            cfg.instances,
            cfg.personality,
            time.monotonic() - started,
        )
        if on_ready is not None:
            on_ready(cluster)
        if ready is not None:
            ready.set()
        if not await cluster.wait(stop):
            raise EngineError(
                "every simulated engine crashed (fault injection)",
                hint="drop --fault crash-after=... or clear it with DELETE /admin/faults before it fires",
            )
    finally:
        await cluster.close()
