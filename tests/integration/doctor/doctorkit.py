"""Helpers for doctor's live tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import aiohttp.web
import attrs
import httpx
import kmock
from kmock._internal import rendering

AccessRule = Callable[[dict[str, Any]], bool]


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


@attrs.define(kw_only=True)
class AccessReviewingEmulator(kmock.KubernetesEmulator):
    """kmock's emulator, answering SelfSubjectAccessReviews as a real server does (with ``status.allowed``,
    storing nothing) instead of keeping each review as a nameless object."""

    allow: AccessRule = lambda attrs: True
    """``spec.resourceAttributes`` -> allowed."""

    async def _handle(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        r = request.resource
        if r is not None and r.plural == "selfsubjectaccessreviews" and isinstance(request.data, dict):
            attrs_ = request.data.get("spec", {}).get("resourceAttributes", {})
            answer = {**request.data, "status": {"allowed": self.allow(attrs_)}}
            return aiohttp.web.json_response(answer, status=201)
        return await super()._handle(request)
