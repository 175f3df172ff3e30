"""``start_fake``: a fake OpenAI server (``benchkit.FakeServer``) on a free 127.0.0.1 port."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from benchkit import FakeServer, StartFake, app_for


@pytest.fixture
async def start_fake() -> AsyncIterator[StartFake]:
    runners: list[web.AppRunner] = []

    async def start(**kw: Any) -> FakeServer:
        fake = FakeServer(**kw)
        runner = web.AppRunner(app_for(fake), shutdown_timeout=0.1)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        port = runner.addresses[0][1]
        fake.url = f"http://127.0.0.1:{port}"
        return fake

    yield start
    for r in runners:
        await r.cleanup()
