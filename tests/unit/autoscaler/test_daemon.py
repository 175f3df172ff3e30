"""The daemon loop on a fake clock with a fake actuator and MockTransport engines: decide, scale, export."""

from __future__ import annotations

import asyncio
import gc
import itertools

import httpx
import pytest
from daemonkit import FakeActuator, drive, engines
from policykit import aggregated

from infctl.autoscaler.daemon import AutoscalerConfig, serve
from infctl.autoscaler.fleet import Fleet
from infctl.autoscaler.metrics import AutoscalerMetrics
from infctl.autoscaler.settings import PolicyConfig, UnitConfig
from infctl.autoscaler.snapshot import UnitStatus
from infctl.telemetry import parse_metrics


async def test_scales_up_then_holds_while_cooling_down() -> None:
    cfg = AutoscalerConfig(policy=aggregated(hi=8, up_cooldown_s=30), interval_s=0, port=None)
    actuator = FakeActuator(2)
    decisions = await drive(cfg, actuator, waiting=20, ticks=4)
    # 2 x 20 waiting need 5 at 8 each: up to 5 at t=0; then 5 x 20 need 13 (max 8): t=15 cools down, t=30 up.
    assert actuator.calls == [("both", 5), ("both", 8)]
    assert [d.recommendations[0].desired for d in decisions] == [5, 5, 8, 8]


async def test_dry_run_recommends_and_never_scales() -> None:
    cfg = AutoscalerConfig(policy=aggregated(), interval_s=0, port=None, dry_run=True)
    actuator = FakeActuator(2)
    decisions = await drive(cfg, actuator, waiting=20, ticks=2)
    assert actuator.calls == []
    assert decisions[0].recommendations[0].desired == 5


async def test_a_failed_observation_is_counted_and_the_next_tick_goes_on() -> None:
    cfg = AutoscalerConfig(policy=aggregated(), interval_s=0, port=None)
    actuator = FakeActuator(2, fail_first=2)
    await drive(cfg, actuator, waiting=0.1, ticks=1)
    assert actuator.calls == []


async def test_metrics_and_health_are_served(unused_tcp_port: int) -> None:
    cfg = AutoscalerConfig(policy=aggregated(), interval_s=0.01, port=unused_tcp_port)
    actuator, stop, ready = FakeActuator(2), asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(serve(cfg, actuator, ready=ready, stop=stop, transport=engines(20)))
    await asyncio.wait_for(ready.wait(), 30)
    async with httpx.AsyncClient(trust_env=False) as c:
        async with asyncio.timeout(30):  # until a tick has scaled (a loaded machine ticks late)
            while "scale_events_total{" not in (
                text := (await c.get(f"http://127.0.0.1:{unused_tcp_port}/metrics")).text
            ):
                await asyncio.sleep(0.02)
        health = (await c.get(f"http://127.0.0.1:{unused_tcp_port}/health")).json()
    stop.set()
    await task
    assert health == {"status": "ok", "dry_run": False}
    assert 'infctl_autoscaler_scale_events_total{unit="both",direction="up"} 1' in text
    assert 'infctl_autoscaler_desired_replicas{unit="both"} 5' in text
    assert "infctl_autoscaler_queue_per_replica" in text and "infctl_autoscaler_dry_run 0" in text


def test_metrics_render_before_any_decision() -> None:
    text = AutoscalerMetrics(dry_run=True).render()
    assert "infctl_autoscaler_dry_run 1" in text and "infctl_autoscaler_ttft_p99_seconds NaN" in text


@pytest.fixture
def unused_tcp_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def test_cancelled_between_ticks_leaves_no_task_pending() -> None:
    """Cancelled while it waits for the next tick (a caller's shutdown): its wait on ``stop`` ends too, or
    the next garbage collection reports "Task was destroyed but it is pending!"."""
    loop = asyncio.get_running_loop()
    reported: list[str] = []
    loop.set_exception_handler(lambda _, ctx: reported.append(f"{ctx.get('message')} {ctx.get('task')!r}"))
    try:
        cfg = AutoscalerConfig(policy=aggregated(), interval_s=60, port=None)
        ticked = asyncio.Event()
        stop = asyncio.Event()
        task = asyncio.create_task(
            serve(
                cfg, FakeActuator(1), stop=stop, on_decision=lambda d, s: ticked.set(), transport=engines(0)
            )
        )
        await asyncio.wait_for(ticked.wait(), 10)
        await asyncio.sleep(0)  # into the wait for the next tick
        task.cancel()
        await asyncio.wait({task})  # not awaited: its traceback would keep the waiter alive
        assert task.cancelled()
        del task, stop
        gc.collect()
        await asyncio.sleep(0)
        assert not reported
    finally:
        loop.set_exception_handler(None)


class ScriptedActuator:
    """Reports ``script``'s unit statuses in turn, then the last one for ever; never scaled (dry run)."""

    def __init__(self, script: list[UnitStatus]) -> None:
        self.script, self.observed = script, 0

    async def observe(self) -> Fleet:
        status = self.script[min(self.observed, len(self.script) - 1)]
        self.observed += 1
        return Fleet(units={"both": status})

    async def scale(self, unit: str, replicas: int) -> None:
        raise AssertionError("a dry run scales nothing")


async def startup_series(script: list[UnitStatus], port: int) -> dict[str, float]:
    """The daemon's start-up series for unit ``both`` (hold 20 s, 15 s a decision) once it has seen all of
    ``script``, read from its /metrics."""
    policy = PolicyConfig(units=(UnitConfig("both", 0, 4, scale_to_zero_after_s=86400),))
    cfg = AutoscalerConfig(policy=policy, dry_run=True, interval_s=0.01, port=port, hold_when_empty_s=20)
    actuator, stop, ready = ScriptedActuator(script), asyncio.Event(), asyncio.Event()
    clock = itertools.count(0.0, 15.0)
    task = asyncio.create_task(
        serve(cfg, actuator, ready=ready, stop=stop, transport=engines(0), clock=lambda: next(clock))
    )
    try:
        await asyncio.wait_for(ready.wait(), 30)
        async with asyncio.timeout(30):
            while actuator.observed <= len(script):  # the last status seen, and its tick's metrics recorded
                await asyncio.sleep(0.01)
        async with httpx.AsyncClient(trust_env=False) as c:
            text = (await c.get(f"http://127.0.0.1:{port}/metrics")).text
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
    names = {"over": OVER, "count": STARTUPS + "_count"}
    families = parse_metrics(text, set(names.values()))
    found = {n: s.value for n, samples in families.items() for s in samples if s.labels.get("unit") == "both"}
    return {k: found.get(name, float("nan")) for k, name in names.items()}


OVER = "infctl_autoscaler_startup_over_hold"
STARTUPS = "infctl_autoscaler_replica_startup_seconds"


async def test_a_readiness_blip_longer_than_the_hold_is_no_slow_start_up(
    unused_tcp_port: int, caplog: pytest.LogCaptureFixture
) -> None:
    # One of two replicas fails readiness for 45 s (three decisions) and recovers; nobody scaled.
    blip = [UnitStatus(2, 2), UnitStatus(2, 1), UnitStatus(2, 1), UnitStatus(2, 1), UnitStatus(2, 2)]
    series = await startup_series(blip, unused_tcp_port)
    assert series == {"over": 0.0, "count": 0.0}
    assert not [r for r in caplog.records if "startup over hold" in r.getMessage()]


async def test_a_scale_up_slower_than_the_hold_is_flagged(
    unused_tcp_port: int, caplog: pytest.LogCaptureFixture
) -> None:
    # Another scaler (or the router's wake-up) asks for one replica from 0; it is ready 30 s later.
    rise = [UnitStatus(0, 0), UnitStatus(1, 0), UnitStatus(1, 0), UnitStatus(1, 1)]
    series = await startup_series(rise, unused_tcp_port)
    assert series == {"over": 1.0, "count": 1.0}
    warnings = [r.getMessage() for r in caplog.records if "startup over hold" in r.getMessage()]
    assert len(warnings) == 1 and "startup_s=30" in warnings[0]
