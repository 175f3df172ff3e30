"""Starting a coroutine in the current callback up to its first suspension: an eager task.

Why: ``loop.create_task`` runs a coroutine's first step on a later turn of the event loop, behind every
callback already queued: other requests' chunks, a scrape's answer being parsed, a probe. For the lean front
(``infctl.router.front``) that first step is the whole way from a request's last byte to its upstream send
(parse, route, write), so a request would wait for whatever happened to be queued; started here it goes out
before anything else runs. Only once the coroutine awaits something not yet done does it wait like any task:
the caller gets the task (or the finished result).

On 3.12+ this is the standard library's eager task (``asyncio.eager_task_factory``): the first step runs
inside its ``Task``, so ``asyncio.timeout`` and ``asyncio.wait_for`` (built on it since 3.12) work from
the first line. 3.11 has no eager tasks, so a stand-in runs the first step with no current task
(``asyncio.current_task()`` is None) and hands the suspended coroutine to a task; there ``asyncio.timeout``
and ``TaskGroup`` must not be entered before the first suspension (3.11's ``wait_for`` needs no task).
The lean front's request path enters neither before it first waits, so it runs alike on every version.
"""

from __future__ import annotations

import asyncio
import contextvars
import sys
from collections.abc import Coroutine, Generator
from typing import Any, TypeVar

T = TypeVar("T")


def start_eagerly(
    coro: Coroutine[Any, Any, T], loop: asyncio.AbstractEventLoop
) -> asyncio.Task[T] | tuple[T]:
    """Run ``coro`` now until it first suspends, then let a task of ``loop`` finish it. Returns that task,
    or ``(result,)`` when ``coro`` finished without suspending. An exception ``coro`` raises before
    suspending propagates to the caller (as it would out of the task's ``result()``)."""
    if sys.version_info >= (3, 12):
        task: asyncio.Task[T] = asyncio.eager_task_factory(loop, coro)
        if task.done():
            return (task.result(),)
        return task
    context = contextvars.copy_context()  # as create_task: the coroutine's context changes stay its own
    try:
        first = context.run(coro.send, None)
    except StopIteration as stop:
        return (stop.value,)
    return loop.create_task(_Resumed(coro, first), context=context)


class _Resumed(Coroutine[Any, Any, T]):
    """(3.11) ``coro``, already started, for a task: its first step hands the task ``first`` (the future
    ``coro`` is blocked on, or None for a bare yield), as if ``coro`` had just yielded it; from then on every
    step is ``coro``'s own."""

    __slots__ = ("_coro", "_first", "_started")

    def __init__(self, coro: Coroutine[Any, Any, T], first: Any) -> None:
        self._coro, self._first, self._started = coro, first, False

    def send(self, value: Any) -> Any:
        if not self._started:
            self._started = True
            first, self._first = self._first, None
            return first
        return self._coro.send(value)

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        # A task cancelled before its first step throws here. A task cancelled later cancels the future it
        # waits on (``Task.cancel``), so do the same with ``first``, handed back for the task to wait on:
        # ``coro`` sees the cancellation when it resumes, and what it awaited (an inner task, a socket's
        # connect) is cancelled too, not left running. A bare yield, or a ``first`` already done, gets
        # the error where ``coro`` waits.
        first, self._started, self._first = self._first, True, None
        cancelled = isinstance(typ, asyncio.CancelledError) and asyncio.isfuture(first)
        if cancelled and first.cancel(typ.args[0] if typ.args else None):
            return first
        if val is None and tb is None:
            return self._coro.throw(typ)
        return self._coro.throw(typ, val, tb)  # pragma: no cover - the task throws instances only

    def close(self) -> None:
        self._coro.close()

    def __await__(self) -> Generator[Any, None, T]:
        raise TypeError("driven by its task only")  # pragma: no cover
