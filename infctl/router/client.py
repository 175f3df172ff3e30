"""What the routing path reads from a client's request, whichever front received it."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Protocol


class ClientRequest(Protocol):
    """What the routing path reads from a client's request: aiohttp's ``web.Request`` and the lean front's
    ``FrontRequest`` (``infctl.router.front``) both satisfy it: one copy of the routing logic serves both."""

    @property
    def headers(self) -> Mapping[str, str]:
        """Case-insensitive request headers."""

    @property
    def path(self) -> str:
        """The request target's path (no query)."""

    @property
    def transport(self) -> asyncio.Transport | None:
        """The client's connection (None once it has gone)."""

    @property
    def keep_alive(self) -> bool: ...

    @property
    def version(self) -> tuple[int, int]: ...

    async def read(self) -> bytes:
        """The whole request body."""
