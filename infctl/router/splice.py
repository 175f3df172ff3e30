"""How the lean front (``infctl.router.front``) gives aiohttp a connection it does not serve itself: the
client's connection is spliced, byte for byte, to the router's aiohttp application listening on a private
Unix socket (``web.UnixSite`` in a directory only this user can enter).

Why a splice: the requests the lean front leaves to aiohttp (admin, /metrics, /health, /ready,
/v1/models, chunked or ``Expect`` bodies, HTTP/1.0) are off the hot path, and aiohttp offers no public way
to take over a connection another protocol has started reading. Everything here is asyncio's public
protocol API; aiohttp sees an ordinary connection. The cost is one local hop for those requests.

From the hand-over on, the connection is aiohttp's: its keep-alive and head timeouts (``keepalive_timeout``
= ``header_timeout_s``) apply, and whichever side closes closes the other. Flow control follows the
slower side: a client that reads slowly pauses reading from aiohttp, and aiohttp reading an upload slowly
pauses reading from the client.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import tempfile
from typing import cast

from aiohttp import web

log = logging.getLogger(__name__)


class Splicer:
    """Splices handed-over client connections to the aiohttp application at ``path`` (a Unix socket)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.connections: set[ClientSide] = set()
        """Client connections spliced and still open (``max_connections`` counts them)."""

    @classmethod
    async def serve(cls, runner: web.BaseRunner) -> Splicer:
        """Start ``runner``'s application on a Unix socket in a new directory only this user can enter
        (``tempfile.mkdtemp``: mode 0700), and splice to it. :meth:`remove` deletes the directory."""
        # A Unix socket's path holds at most 107 bytes: a long TMPDIR falls back to /tmp.
        base = None if len(tempfile.gettempdir()) <= 64 else "/tmp"
        directory = tempfile.mkdtemp(prefix="infctl-router-", dir=base)
        path = os.path.join(directory, "aiohttp.sock")
        await web.UnixSite(runner, path).start()
        return cls(path)

    def remove(self) -> None:
        shutil.rmtree(os.path.dirname(self.path), ignore_errors=True)

    def take(self, transport: asyncio.Transport, data: bytes) -> None:
        """From now on ``transport`` (whose first unserved bytes are ``data``) is aiohttp's."""
        side = ClientSide(self, transport, data)
        transport.set_protocol(side)
        self.connections.add(side)
        side.start()

    def abort_all(self) -> None:
        """Cut every spliced connection (the router is stopping)."""
        for side in list(self.connections):
            side.client.abort()


class ClientSide(asyncio.Protocol):
    """The client's end of a splice: its bytes go to aiohttp (held while the inner connection opens)."""

    def __init__(self, splicer: Splicer, client: asyncio.Transport, data: bytes) -> None:
        self.splicer, self.client = splicer, client
        self.inner: asyncio.Transport | None = None
        self.pending = [data] if data else []
        self._connecting: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.client.pause_reading()  # until the inner connection is open: nothing piles up meanwhile
        self._connecting = asyncio.get_running_loop().create_task(self._connect())

    async def _connect(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            inner, _ = await loop.create_unix_connection(lambda: InnerSide(self), self.splicer.path)
        except OSError as exc:
            log.warning("lean front: cannot reach the aiohttp application at %s: %s", self.splicer.path, exc)
            self.client.abort()
            return
        if self.client.is_closing():
            inner.close()
            return
        self.inner = inner
        inner.write(b"".join(self.pending))
        self.pending.clear()
        self.client.resume_reading()

    def data_received(self, data: bytes) -> None:
        if self.inner is not None:
            self.inner.write(data)
        else:
            self.pending.append(data)

    def eof_received(self) -> bool:
        return False  # as aiohttp's own server: a client that half-closes has gone

    def connection_lost(self, exc: Exception | None) -> None:
        self.splicer.connections.discard(self)
        if self.inner is not None:
            self.inner.close()  # aiohttp sees the client leave (its handler is cancelled)
        elif self._connecting is not None:
            self._connecting.cancel()

    def pause_writing(self) -> None:
        if self.inner is not None:
            self.inner.pause_reading()

    def resume_writing(self) -> None:
        if self.inner is not None and not self.inner.is_closing():
            self.inner.resume_reading()


class InnerSide(asyncio.Protocol):
    """aiohttp's end of a splice: what it writes goes to the client."""

    def __init__(self, outer: ClientSide) -> None:
        self.outer = outer
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.outer.client.write(data)

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        # aiohttp closed (after an answer with ``connection: close``, at its keep-alive timeout) or cut a
        # stream: the client's connection ends too, after what was written (a cut answer stays short).
        self.outer.inner = None
        with contextlib.suppress(RuntimeError):
            self.outer.client.close()

    def pause_writing(self) -> None:
        self.outer.client.pause_reading()

    def resume_writing(self) -> None:
        if not self.outer.client.is_closing():
            self.outer.client.resume_reading()
