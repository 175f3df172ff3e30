"""The I/O of continuing a broken stream (``infctl.router.resume`` has the rules): the client's response, left
open by the relay that broke, to which events are appended; and the continuation's upstream exchange, whose
events are rewritten into it. A continuation's opening is judged as a first try's is
(``upstream.past_opening``): one that opens with an engine's 5xx error event (after its role chunk or none)
has added nothing to the client's stream, so it is a failed try (``UpstreamFailed``) and the next backend
continues, not an error the client reads in the middle of its answer.

The continuation takes aiohttp's client (``RouterState.session``), not the lean one: it runs only after a
failure, parses every event anyway, and must reach HTTPS backends too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import aiohttp
from aiohttp import web

from infctl.router.client import ClientRequest
from infctl.router.relay import RelayedResponse
from infctl.router.resume import Rewriter
from infctl.router.upstream import RelayResult, UpstreamFailed, cut, past_opening, read_events, send

if TYPE_CHECKING:
    from infctl.router.state import RouterState

_HIGH_WATER = 256 * 1024
"""Client-side send buffer (bytes) above which a continuation waits for the client to catch up."""
_LOW_WATER = 64 * 1024
_DRAIN_POLL_S = 0.005


class ClientStream:
    """The client's open response: either bytes the lean relay wrote to the socket itself (the upstream's
    chunked framing, which appended chunks continue) or aiohttp's prepared ``StreamResponse``."""

    def __init__(self, request: ClientRequest, out: web.StreamResponse) -> None:
        self.request, self.out = request, out
        self.lean = isinstance(out, RelayedResponse)

    async def write(self, data: bytes) -> None:
        """Append ``data``; ConnectionResetError when the client has gone."""
        if not self.lean:
            await self.out.write(data)
            return
        tr = self.request.transport
        if tr is None or tr.is_closing():
            raise ConnectionResetError("the client went away")
        tr.write(b"%x\r\n%b\r\n" % (len(data), data))
        if tr.get_write_buffer_size() > _HIGH_WATER:
            # A transport's buffer level has no public event; polling runs only while a client is slow.
            while not tr.is_closing() and tr.get_write_buffer_size() > _LOW_WATER:  # noqa: ASYNC110
                await asyncio.sleep(_DRAIN_POLL_S)

    async def end(self) -> web.StreamResponse:
        """End the response cleanly (its terminating chunk): the connection may serve the next request."""
        if not self.lean:
            await self.out.write_eof()
            return self.out
        tr = self.request.transport
        if tr is None or tr.is_closing():
            return self.out
        tr.write(b"0\r\n\r\n")
        return RelayedResponse(self.out.status, keep_alive=self.request.keep_alive)

    def cut(self) -> web.StreamResponse:
        cut(self.request, self.out)
        return self.out


class Continuation:
    """One broken stream's continuations: ``relay`` has ``attempt.relay_answer``'s signature, so
    ``attempt.try_once`` runs a continuation as any try (pool accounting, PD legs, metrics)."""

    def __init__(self, client: ClientStream, rewriter: Rewriter) -> None:
        self.client, self.rewriter = client, rewriter
        self.refusal: tuple[int, bytes] | None = None
        """A continuation's 4xx answer (status, body): the request cannot go on."""

    async def relay(
        self,
        state: RouterState,
        request: ClientRequest,
        url: str,
        payload: bytes,
        headers: Mapping[str, str],
        rid: str,
        on_first: Callable[[], None],
        keep: list[bytes] | None = None,
    ) -> tuple[web.StreamResponse, RelayResult]:
        """Send one continuation and append its rewritten events to the client's response. UpstreamFailed
        while it has added nothing (another backend may take it); a result not ``completed`` when it broke
        after adding some (the next continuation goes on from there)."""
        resp = await send(state.session, url, payload, headers)
        try:
            if resp.status >= 500:
                await resp.read()
                raise UpstreamFailed(f"HTTP {resp.status}", status=resp.status)
            if resp.status >= 400:
                self.refusal = (resp.status, await resp.read())
                return self.client.out, RelayResult(resp.status, None, 0, completed=True)
            return await self._events(resp, on_first)
        except BaseException:
            resp.close()  # cancellation included: the engine learns to abort the request
            raise
        finally:
            resp.release()

    async def _events(
        self, resp: aiohttp.ClientResponse, on_first: Callable[[], None]
    ) -> tuple[web.StreamResponse, RelayResult]:
        try:
            chunk, held = await read_events(resp.content, b"")
            if resp.status == 200:
                chunk, held = await past_opening(resp.content, chunk, held)
        except (TimeoutError, aiohttp.ClientError, ConnectionResetError) as exc:
            raise UpstreamFailed(f"broke before the first byte: {type(exc).__name__}") from exc
        wrote = 0
        while chunk:
            data = self.rewriter.events(chunk)
            if data:
                if not wrote:
                    on_first()
                try:
                    await self.client.write(data)
                except ConnectionResetError:
                    resp.close()
                    return self.client.out, RelayResult(resp.status, None, wrote, False, client_gone=True)
                wrote += len(data)
            try:
                chunk, held = await read_events(resp.content, held)
            except (TimeoutError, aiohttp.ClientError, ConnectionResetError) as exc:
                if not wrote:
                    raise UpstreamFailed(f"broke before the first byte: {type(exc).__name__}") from exc
                resp.close()
                return self.client.out, RelayResult(resp.status, None, wrote, completed=False)
        if not wrote:
            raise UpstreamFailed("the continuation answered no events")
        # A clean end without [DONE] is a stream cut short all the same: the next continuation goes on.
        done = self.rewriter.sent.done
        return self.client.out, RelayResult(resp.status, None, wrote, completed=done)
