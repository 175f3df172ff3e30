"""Every live router test here runs on both fronts: aiohttp's server and the lean one (``--server lean``).

``start_router`` wraps the root one (tests/conftest.py): same defaults and calling convention, with the front
of this test's ``server`` parameter unless the test names one. Puts tests/integration on sys.path so this
folder's tests import the shared helpers there (``from kvkit import ...``)."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from infctl.router.snapshot import Backend

_INTEGRATION = str(Path(__file__).resolve().parent.parent)
if _INTEGRATION not in sys.path:
    sys.path.insert(0, _INTEGRATION)

StartRouter = Callable[..., Awaitable[str]]


@pytest.fixture(params=["aiohttp", "lean"])
def server(request: pytest.FixtureRequest) -> str:
    """The front the router under test listens with."""
    return str(request.param)


@pytest.fixture
def start_router(start_router: StartRouter, server: str) -> StartRouter:
    """``url = await start_router([Backend(...), ...], policy=..., **RouterConfig fields)``; also
    ``kube_connect=``, ``upstream_client=`` and ``server=`` (default: this test's parameter)."""

    async def start(backends: list[Backend], **overrides: Any) -> str:
        overrides.setdefault("server", server)
        return await start_router(backends, **overrides)

    return start
