"""Daemon test helpers: a fake actuator, MockTransport engines, and a driver on a fake clock."""

from __future__ import annotations

import asyncio
import itertools

import httpx

from infctl.autoscaler.daemon import AutoscalerConfig, serve
from infctl.autoscaler.fleet import Fleet, ReplicaInfo
from infctl.autoscaler.snapshot import Decision, ScalingSnapshot, UnitStatus
from infctl.errors import LocalTargetError


class FakeActuator:
    """Scaling takes effect at once; every replica reports ``waiting`` requests."""

    def __init__(self, replicas: int, fail_first: int = 0) -> None:
        self.replicas, self.fail_first = replicas, fail_first
        self.calls: list[tuple[str, int]] = []

    async def observe(self) -> Fleet:
        if self.fail_first:
            self.fail_first -= 1
            raise LocalTargetError("supervisor unreachable")
        infos = tuple(ReplicaInfo(f"e{i}", f"http://e{i}:8000", "both") for i in range(self.replicas))
        return Fleet(units={"both": UnitStatus(self.replicas, self.replicas)}, replicas=infos)

    async def scale(self, unit: str, replicas: int) -> None:
        self.calls.append((unit, replicas))
        self.replicas = replicas


def engines(waiting: float) -> httpx.MockTransport:
    text = f'vllm:num_requests_waiting{{model_name="m"}} {waiting}\nvllm:kv_cache_usage_perc 0.2\n'
    return httpx.MockTransport(lambda req: httpx.Response(200, text=text))


async def drive(
    cfg: AutoscalerConfig, actuator: FakeActuator, waiting: float, ticks: int, wall0: float = 0.0
) -> list[Decision]:
    """Run the daemon for ``ticks`` decisions, 15 s apart from 0 on its clock (``wall0`` plus that on the
    wall clock)."""
    stop, seen = asyncio.Event(), []

    def on_decision(decision: Decision, snap: ScalingSnapshot) -> None:
        seen.append(decision)
        if len(seen) == ticks:
            stop.set()

    times, last = itertools.count(0.0, 15.0), [0.0]

    def clock() -> float:
        last[0] = next(times)
        return last[0]

    await asyncio.wait_for(
        serve(
            cfg,
            actuator,
            stop=stop,
            on_decision=on_decision,
            transport=engines(waiting),
            clock=clock,
            time_of_day=lambda: 12 * 3600.0,
            wall=lambda: wall0 + last[0],
        ),
        timeout=10,
    )
    return seen
