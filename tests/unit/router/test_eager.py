"""``start_eagerly``: a coroutine runs in the caller up to its first wait, then a task finishes it with the
semantics ``create_task`` would have given (results, errors, cancellation at any point, context)."""

from __future__ import annotations

import asyncio
import contextvars
import sys
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest

from infctl.router.eager import start_eagerly

EAGER_TASKS = sys.version_info >= (3, 12)
"""The standard library's eager tasks (3.12+) rather than the 3.11 stand-in."""

T = TypeVar("T")
VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="outside")


async def waits_for(fut: asyncio.Future[int], log: list[str]) -> int:
    log.append("started")
    try:
        value = await fut
    except asyncio.CancelledError:
        log.append("cancelled")
        raise
    log.append(f"in task: {asyncio.current_task() is not None}")
    await asyncio.sleep(0)  # and a bare yield after that
    return value * 2


def start_waiting() -> tuple[asyncio.Future[int], list[str], asyncio.Task[int]]:
    """``waits_for`` started eagerly: (the future it waits on, its log, the task that took it over)."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[int] = loop.create_future()
    log: list[str] = []
    task = start_eagerly(waits_for(fut, log), loop)
    assert isinstance(task, asyncio.Task)
    return fut, log, task


async def test_runs_in_the_caller_until_its_first_wait_then_in_a_task() -> None:
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[int] = loop.create_future()
    log: list[str] = []
    started = start_eagerly(waits_for(fut, log), loop)
    assert log == ["started"]  # before the caller returned to the loop
    assert isinstance(started, asyncio.Task) and not started.done()
    fut.set_result(21)
    assert await started == 42
    assert log == ["started", "in task: True"]


async def test_a_coroutine_that_never_waits_returns_its_result_and_makes_no_task() -> None:
    async def at_once() -> str:
        return "done"

    assert start_eagerly(at_once(), asyncio.get_running_loop()) == ("done",)


async def test_an_error_before_the_first_wait_reaches_the_caller() -> None:
    async def fails() -> None:
        raise ValueError("early")

    with pytest.raises(ValueError, match="early"):
        start_eagerly(fails(), asyncio.get_running_loop())


async def test_cancelled_before_the_task_first_ran_the_coroutine_sees_the_cancellation() -> None:
    _, log, task = start_waiting()
    task.cancel()  # at once: the task has not taken a step yet
    with pytest.raises(asyncio.CancelledError):
        await task
    assert log == ["started", "cancelled"]


async def test_cancelled_before_the_task_first_ran_cancels_what_it_waits_for() -> None:
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[int] = loop.create_future()
    inner_log: list[str] = []
    inner = loop.create_task(waits_for(fut, inner_log))
    await asyncio.sleep(0)  # inner now waits on fut (what a connect or an upstream read would be)

    async def outer() -> int:
        return await inner

    task = start_eagerly(outer(), loop)
    assert isinstance(task, asyncio.Task)
    task.cancel("client gone")  # at once, as a disconnect queued in the same loop turn would
    with pytest.raises(asyncio.CancelledError):
        await task
    assert inner.cancelled() and fut.cancelled()  # as create_task: nothing it awaited is left running
    assert inner_log == ["started", "cancelled"]


async def test_cancelled_while_waiting_cancels_what_it_waits_for() -> None:
    fut, log, task = start_waiting()
    await asyncio.sleep(0)  # the task now waits on fut
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert fut.cancelled() and log == ["started", "cancelled"]


async def test_an_error_after_the_first_wait_is_the_task_s() -> None:
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[int] = loop.create_future()
    task = start_eagerly(waits_for(fut, []), loop)
    assert isinstance(task, asyncio.Task)
    fut.set_exception(OSError("late"))
    with pytest.raises(OSError, match="late"):
        await task


async def test_context_changes_stay_the_coroutine_s_own_before_and_after_its_first_wait() -> None:
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[None] = loop.create_future()
    seen: list[str] = []

    async def sets() -> None:
        VAR.set("inside")
        await fut
        seen.append(VAR.get())

    task = start_eagerly(sets(), loop)
    assert VAR.get() == "outside"
    assert isinstance(task, asyncio.Task)
    fut.set_result(None)
    await task
    assert seen == ["inside"]


async def from_callback(coro: Coroutine[Any, Any, T]) -> asyncio.Task[T] | tuple[T]:
    """``start_eagerly(coro)`` called from a loop callback, as the lean front's protocol calls it: outside
    any task (called from a test's own coroutine, the test's task would be the current one)."""
    loop = asyncio.get_running_loop()
    out: asyncio.Future[asyncio.Task[T] | tuple[T]] = loop.create_future()

    def callback() -> None:
        try:
            out.set_result(start_eagerly(coro, loop))
        except Exception as exc:  # raised before the first wait: the caller's, as documented
            out.set_exception(exc)

    loop.call_soon(callback)
    return await out


async def test_wait_for_works_before_the_first_wait() -> None:
    """What admission does first (``AdmissionQueue.admit``): since 3.12 ``wait_for`` is an
    ``asyncio.timeout``, which needs a current task; run outside one it raised RuntimeError ("Timeout should
    be used inside a task") and the lean front answered 500 instead of queueing."""
    fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def admits() -> int:
        return await asyncio.wait_for(asyncio.shield(fut), timeout=30)

    task = await from_callback(admits())
    assert isinstance(task, asyncio.Task)
    fut.set_result(7)
    assert await task == 7


async def test_wait_for_times_out_before_the_first_wait() -> None:
    async def admits() -> None:
        await asyncio.wait_for(asyncio.get_running_loop().create_future(), timeout=0.01)

    task = await from_callback(admits())
    assert isinstance(task, asyncio.Task)
    with pytest.raises(TimeoutError):
        await task


@pytest.mark.skipif(not EAGER_TASKS, reason="3.11's stand-in runs the first step outside a task")
async def test_on_3_12_the_first_step_runs_in_the_task_returned() -> None:
    fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    seen: list[asyncio.Task[Any] | None] = []

    async def times() -> None:
        seen.append(asyncio.current_task())
        async with asyncio.timeout(30):
            await fut

    task = await from_callback(times())
    assert isinstance(task, asyncio.Task)
    assert seen == [task]
    fut.set_result(None)
    await task
