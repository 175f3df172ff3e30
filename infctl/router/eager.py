"""Starting a coroutine in the current callback up to its first suspension (3.12's eager tasks, on 3.11).

Why: ``loop.create_task`` runs a coroutine's first step on a later turn of the event loop, behind every
callback already queued: other requests' chunks, a scrape's answer being parsed, a probe. For the lean front
(``infctl.router.front``) that first step is the whole way from a request's last byte to its upstream send
(parse, route, write), so a request would wait for whatever happened to be queued; started here it goes out
before anything else runs. Only once the coroutine awaits something not yet done does a ``Task`` take it
over, from exactly where it stopped: the caller sees a task (or the finished result) as if ``create_task``
had run it.

One difference from a task's first step: until it suspends, the coroutine runs with no current task
(``asyncio.current_task()`` is None, so ``asyncio.timeout`` and ``TaskGroup`` must not be entered before the
first suspension). The lean front's request path uses neither.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Coroutine, Generator
from typing import Any, TypeVar

T = TypeVar("T")


def start_eagerly(
    coro: Coroutine[Any, Any, T], loop: asyncio.AbstractEventLoop
) -> asyncio.Task[T] | tuple[T]:
    """Run ``coro`` now until it first suspends, then hand it to a task of ``loop``. Returns that task, or
    ``(result,)`` when ``coro`` finished without suspending. An exception ``coro`` raises before suspending
    propagates to the caller (as it would out of the task's ``result()``)."""
    context = contextvars.copy_context()  # as create_task: the coroutine's context changes stay its own
    try:
        first = context.run(coro.send, None)
    except StopIteration as stop:
        return (stop.value,)
    return loop.create_task(_Resumed(coro, first), context=context)


class _Resumed(Coroutine[Any, Any, T]):
    """``coro``, already started, for a task: its first step hands the task ``first`` (the future ``coro``
    is blocked on, or None for a bare yield), as if ``coro`` had just yielded it; from then on every
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
