"""The step-loop driver's waits: a step that gives a request its first token is handed out at its end, not
before it, and waiting for it never stops the loop from serving others."""

from __future__ import annotations

import asyncio

from infctl.sim.driver import TIMER_SLACK_SECONDS, Driver, SimClock, _until
from infctl.sim.faults import FaultPlan, FaultState
from infctl.sim.personality.engine_view import EngineMetrics
from infctl.sim.profiles import TINY_CPU
from infctl.sim.scheduler import EngineCore
from infctl.sim.types import SimRequest
from infctl.tokens import synth_words, token_ids


def _driver() -> Driver:
    return Driver(EngineCore(TINY_CPU), SimClock(1.0), FaultState(FaultPlan()), EngineMetrics({}))


async def test_precise_wait_returns_at_the_deadline_never_before() -> None:
    loop = asyncio.get_running_loop()
    # Farther than the slack (timer, then yields), within it (yields only), and already past.
    for ahead in (3 * TIMER_SLACK_SECONDS, TIMER_SLACK_SECONDS / 2, -0.001):
        deadline = loop.time() + ahead
        await _until(loop, deadline, precise=True)
        assert loop.time() >= deadline


async def test_precise_wait_keeps_the_loop_serving_until_the_deadline() -> None:
    loop = asyncio.get_running_loop()
    ticks = 0
    stop = False

    async def other_work() -> None:
        nonlocal ticks
        while not stop:
            ticks += 1
            await asyncio.sleep(0)

    worker = asyncio.create_task(other_work())
    await asyncio.sleep(0)
    before = ticks
    # Deadline inside the slack: the whole wait is spent yielding, so the other task runs throughout.
    await _until(loop, loop.time() + TIMER_SLACK_SECONDS / 2, precise=True)
    stop = True
    await worker
    assert ticks > before + 1


async def test_first_token_is_handed_out_at_its_step_end_and_not_before() -> None:
    driver = _driver()
    driver.start()
    try:
        clock = driver.clock
        for salt in range(3):
            track = driver.submit(
                SimRequest(f"r{salt}", token_ids(synth_words(256, salt=salt)), 2, clock.now())
            )
            delta = await asyncio.wait_for(track.queue.get(), 5)
            handed_out = clock.now()
            assert delta.tokens == 1 and track.first_token_at is not None
            assert handed_out >= track.first_token_at  # the step's modelled end
            while not track.done:
                await asyncio.wait_for(track.queue.get(), 5)
            assert track.finish_reason == "length" and track.produced == 2
    finally:
        await driver.close()


async def test_decode_steps_still_deliver_every_token() -> None:
    # Only first-token steps wait precisely; the others sleep plainly and lose no token.
    driver = _driver()
    driver.start()
    try:
        clock = driver.clock
        tracks = [
            driver.submit(SimRequest(f"d{i}", token_ids(synth_words(64, salt=10 + i)), 12, clock.now()))
            for i in range(3)
        ]
        for track in tracks:
            got = 0
            while not track.done or not track.queue.empty():
                got += (await asyncio.wait_for(track.queue.get(), 5)).tokens
            assert got == track.produced == 12 and track.finish_reason == "length"
    finally:
        await driver.close()
