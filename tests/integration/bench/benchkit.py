"""A fake OpenAI server with exactly known timing and failure modes (see ``FakeServer``)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass
class FakeServer:
    """Streams ``tokens`` content chunks: the first ``ttft_s`` after the request arrived, then one every
    ``itl_s`` (deadlines from arrival, so sleeps do not drift); a role-only chunk goes out at once.

    ``?mode=`` picks a failure: ``500``, ``in_stream``, ``hang``, ``truncate``, ``no_done``.
    """

    ttft_s: float = 0.05
    itl_s: float = 0.01
    tokens: int = 5
    slow_when_busy_s: float = 0.0
    """Extra TTFT per other request in flight (a server that saturates)."""
    url: str = ""
    bodies: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    in_flight: int = 0
    delays: list[float] = field(default_factory=list)
    """Seconds from each request's arrival (handler start) to its first content write, as it happened."""
    writes: list[list[float]] = field(default_factory=list)
    """Per request (in arrival order), seconds from its arrival to each content chunk's write, as it happened:
    on a loaded machine the timers wake late, then catch up (deadlines are fixed), so these, not the nominal
    delays, are what a client can be held to."""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        loop = asyncio.get_running_loop()
        start = loop.time()
        body = await request.json()
        self.bodies.append(body)
        self.headers.append(dict(request.headers))
        mode = request.query.get("mode", "ok")
        if mode == "500":
            return web.json_response({"error": {"message": "overloaded", "code": 500}}, status=500)
        chat = "messages" in body
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        self.in_flight += 1
        written: list[float] = []
        self.writes.append(written)
        try:
            if chat:
                await resp.write(
                    _event({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
                )
            delay = self.ttft_s + self.slow_when_busy_s * (self.in_flight - 1)
            n = int(body.get("max_tokens") or self.tokens) if mode == "ok" else self.tokens
            for i in range(n):
                await sleep_until(start + delay + i * self.itl_s)
                if mode == "hang" and i == 1:
                    await asyncio.sleep(3600)
                if mode == "truncate" and i == 2:
                    assert request.transport is not None
                    request.transport.close()
                    return resp
                if mode == "in_stream" and i == 2:
                    await resp.write(_event({"error": {"message": "KV cache exhausted", "code": 400}}))
                    break
                last = i == n - 1 and mode != "no_done"
                written.append(loop.time() - start)
                if i == 0:
                    self.delays.append(written[0])
                await resp.write(_chunk(chat, f" w{i}", "length" if last else None))
            if mode != "no_done":
                await resp.write(
                    _event({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": n}})
                )
                await resp.write(b"data: [DONE]\n\n")
            await resp.write_eof()
            return resp
        finally:
            self.in_flight -= 1


@asynccontextmanager
async def loop_lag(period_s: float = 0.005) -> AsyncIterator[list[float]]:
    """How late this event loop's timers woke while the block ran (seconds, one per ``period_s`` sleep): what
    the machine's load cost every coroutine in the loop meanwhile, measured beside what the test measures."""
    loop = asyncio.get_running_loop()
    lags: list[float] = []

    async def probe() -> None:
        while True:
            before = loop.time()
            await asyncio.sleep(period_s)
            lags.append(loop.time() - before - period_s)

    task = asyncio.create_task(probe())
    try:
        yield lags
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def sleep_until(deadline: float) -> None:
    """Wake at ``deadline`` (loop time) to within ~0.1 ms: asyncio timers wake up to 1 ms late (epoll's
    millisecond timeouts), so sleep to 2 ms before it and yield to the loop for the rest."""
    loop = asyncio.get_running_loop()
    if deadline - loop.time() > 0.002:
        await asyncio.sleep(deadline - loop.time() - 0.002)
    while loop.time() < deadline:
        await asyncio.sleep(0)


def _event(obj: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(obj)}\n\n".encode()


def _chunk(chat: bool, text: str, reason: str | None) -> bytes:
    choice: dict[str, Any] = {"index": 0, "finish_reason": reason}
    if chat:
        choice["delta"] = {"content": text}
    else:
        choice["text"] = text
    return _event({"choices": [choice]})


StartFake = Callable[..., Awaitable[FakeServer]]


def app_for(fake: FakeServer) -> web.Application:
    async def models(_: web.Request) -> web.Response:
        return web.json_response({"data": [{"id": "fake-model"}]})

    app = web.Application()
    app.router.add_post("/v1/completions", fake.handle)
    app.router.add_post("/v1/chat/completions", fake.handle)
    app.router.add_get("/v1/models", models)
    return app
