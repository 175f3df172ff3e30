"""Prefill/decode disaggregation in the simulated engines: how one request takes part (``PDPlan``) and the
rendezvous of the instances of one process (``BootstrapRegistry``)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from infctl.sim.personality.http_json import SimHTTPError


class BootstrapRegistry:
    """PD rendezvous between instances of one process: SGLang's by bootstrap port and ``bootstrap_room``,
    vLLM's NIXL side channels by port.

    A prefill instance registers its bootstrap port; a decode request whose ``bootstrap_port`` is one of
    them waits until the prefill of its room completes at *that* port (as SGLang's decode meets the prefill
    behind the bootstrap server the port names), instead of charging a modelled transfer. A room sent to
    another local prefill's port never completes there: the decode fails after ``pd_wait_timeout``.

    A vLLM prefill instance registers its NIXL side-channel port with its engine id (:attr:`side_channels`);
    a decode whose ``remote_port`` names one of them must name that engine (``remote_engine_id``), as vLLM's
    handshake requires.
    """

    def __init__(self) -> None:
        self.local_ports: set[int] = set()
        self.side_channels: dict[int, str | None] = {}
        """vLLM NIXL: side-channel port -> engine id of the instance of this process listening there (None:
        it crashed)."""
        self._rooms: dict[tuple[int, int], asyncio.Future[bool]] = {}
        self.waiting = 0

    def _future(self, key: tuple[int, int]) -> asyncio.Future[bool]:
        fut = self._rooms.get(key)
        if fut is None:
            fut = self._rooms[key] = asyncio.get_running_loop().create_future()
        return fut

    def complete(self, port: int, room: int, ok: bool) -> None:
        """The prefill of ``room`` behind bootstrap ``port`` ended (``ok``: its KV is ready)."""
        key = (port, room)
        fut = self._future(key)
        if not fut.done():
            fut.set_result(ok)
        # Nobody may ever wait for it (decode went elsewhere): forget it after a while.
        asyncio.get_running_loop().call_later(60.0, self._rooms.pop, key, None)

    async def wait(self, port: int, room: int, limit: float) -> bool:
        """True when the room's prefill behind bootstrap ``port`` succeeded; False on failure or after
        ``limit`` wall seconds."""
        key = (port, room)
        fut = self._future(key)
        self.waiting += 1
        try:
            async with asyncio.timeout(limit):
                return await asyncio.shield(fut)
        except TimeoutError:
            return False
        finally:
            self.waiting -= 1
            if fut.done():
                self._rooms.pop(key, None)


@dataclass(slots=True)
class PDPlan:
    """How one request takes part in prefill/decode disaggregation."""

    max_tokens: int | None = None
    """Forced max_tokens (a prefill leg generates one token)."""
    remote_prefill: bool = False
    """The prompt's KV comes from another engine (the core charges transfer time)."""
    room: int | None = None
    """SGLang bootstrap room."""
    bootstrap_port: int | None = None
    """SGLang: the bootstrap port the room meets at (a prefill leg's own, a decode's ``bootstrap_port``)."""
    prefill_leg: bool = False
    wait_local: bool = False
    """SGLang decode: wait for the room's prefill on an instance of this process first."""
    refusal: SimHTTPError | None = None
    """The engine accepts the request, then aborts it before any token (SGLang: a PD engine given no
    ``bootstrap_room``): a non-streaming request is answered with this error, a streaming one with status
    200 and this error as the stream's only event."""
    extras: dict[str, Any] = field(default_factory=dict)
