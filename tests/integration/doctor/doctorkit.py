"""Helpers for doctor's live tests."""

from __future__ import annotations

import httpx


class MetricsOff(httpx.AsyncBaseTransport):
    """Real HTTP, except that /metrics answers 404 as an engine started without metrics does."""

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/metrics":
            return httpx.Response(404, json={"detail": "Not Found"})
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()
