from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from proxykit import Factory, fake_api


@pytest.fixture
async def api() -> AsyncIterator[tuple[Any, Factory]]:
    """``(emulator, factory)``: the fake API server and a factory of clients of it."""
    async with fake_api() as pair:
        yield pair
