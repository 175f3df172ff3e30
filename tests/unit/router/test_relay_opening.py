"""Both relays (the lean client's and aiohttp's) judge a stream's opening before the client gets a byte: an
engine's 5xx error event there, alone or after role-only chat chunks, is ``UpstreamFailed`` with its status
(retried); a 4xx error event, or an error after content, reaches the client as the engine sent it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from infctl.router.http1 import Http1Pool
from infctl.router.opening import ErrorEvent, judge_opening
from infctl.router.relay import forward_lean
from infctl.router.upstream import RelayResult, UpstreamFailed, forward, make_session

DONE = b"data: [DONE]\n\n"
GUARD_S = 30.0
"""How long one exchange may take before the test fails: a guard against hanging, not a measurement."""


def _event(obj: dict[str, Any], *, spaced: bool = False) -> bytes:
    separators = (", ", ": ") if spaced else (",", ":")
    return b"data: " + json.dumps(obj, separators=separators).encode() + b"\n\n"


def _role(index: int = 0) -> bytes:
    # vLLM 0.32's first_iteration chunk (chat_completion/serving.py), one per choice.
    choice = {
        "index": index,
        "delta": {"role": "assistant", "content": ""},
        "logprobs": None,
        "finish_reason": None,
    }
    return _event({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
                   "choices": [choice], "prompt_token_ids": None})  # fmt: skip


def _content(text: str) -> bytes:
    choice = {"index": 0, "delta": {"content": text}, "logprobs": None, "finish_reason": None}
    return _event({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
                   "choices": [choice]})  # fmt: skip


def _vllm_error(code: int, message: str = "Internal server error") -> bytes:
    # create_streaming_error_response: json.dumps of ErrorResponse.model_dump(), default separators.
    kind = "InternalServerError" if code >= 500 else "BadRequestError"
    return _event({"error": {"message": message, "type": kind, "param": None, "code": code}}, spaced=True)


def _sglang_error(code: int) -> bytes:
    # SGLang's create_streaming_error_response: its flat ErrorResponse under "error".
    flat = {"object": "error", "message": "KV transfer failed", "type": "InternalServerError", "param": None}
    return _event({"error": {**flat, "code": code}}, spaced=True)


Script = list[bytes | asyncio.Event]
"""What the engine answers a POST with: each bytes one chunk (as uvicorn writes each event), each Event
awaited before going on."""


async def _engine(script: Script) -> tuple[asyncio.Server, str]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(x.split(b":")[1]) for x in head.lower().split(b"\r\n") if x.startswith(b"content-length")
        )
        await reader.readexactly(length)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
                     b"transfer-encoding: chunked\r\n\r\n")  # fmt: skip
        for item in script:
            if isinstance(item, asyncio.Event):
                await writer.drain()
                await item.wait()
            else:
                writer.write(b"%x\r\n%b\r\n" % (len(item), item))
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        await reader.read()  # until the relay closes or aborts its connection

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1/chat/completions"


@dataclass
class Outcome:
    """What one exchange through a relay gave the client and the caller."""

    body: bytes = b""
    result: RelayResult | None = None
    failed: UpstreamFailed | None = None
    firsts: int = 0
    """Calls of ``on_first``."""
    sent: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once the client has had a byte."""


class _Client:
    """The lean front's client transport, recording what the relay writes."""

    def __init__(self, outcome: Outcome) -> None:
        self.outcome, self.out = outcome, b""

    def is_closing(self) -> bool:
        return False

    def write(self, data: bytes) -> None:
        self.out += data
        self.outcome.sent.set()

    def get_write_buffer_size(self) -> int:
        return 0


class _Request:
    def __init__(self, transport: _Client) -> None:
        self.transport, self.keep_alive = transport, True


async def _lean(url: str, outcome: Outcome) -> None:
    pool, client = Http1Pool(), _Client(outcome)

    def on_first() -> None:
        outcome.firsts += 1

    try:
        relayed = forward_lean(_Request(client), pool, url, b"{}", {}, request_id="r", on_first=on_first)  # type: ignore[arg-type]
        _, outcome.result = await relayed
    except UpstreamFailed as exc:
        outcome.failed = exc
    finally:
        pool.close()
    head, _, body = client.out.partition(b"\r\n\r\n")
    outcome.body = _dechunk(body) if b"transfer-encoding: chunked" in head else body


async def _aiohttp(url: str, outcome: Outcome) -> None:
    async def handle(request: web.Request) -> web.StreamResponse:
        def on_first() -> None:
            outcome.firsts += 1

        async with make_session(connect_timeout_s=2, read_timeout_s=GUARD_S) as session:
            try:
                out, outcome.result = await forward(
                    request, session, url, b"{}", {}, request_id="r", on_first=on_first
                )
            except UpstreamFailed as exc:
                outcome.failed = exc
                return web.Response(status=502)
        return out

    app = web.Application()
    app.router.add_post("/", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        front = f"http://127.0.0.1:{runner.addresses[0][1]}/"
        async with aiohttp.ClientSession() as session, session.post(front, data=b"{}") as resp:
            if resp.status == 200:
                outcome.sent.set()  # the head goes out with the first body chunk
            outcome.body = await resp.read()
    finally:
        await runner.cleanup()


def _dechunk(data: bytes) -> bytes:
    out, i = b"", 0
    while True:
        j = data.index(b"\r\n", i)
        size = int(data[i:j], 16)
        if not size:
            return out
        out += data[j + 2 : j + 2 + size]
        i = j + 2 + size + 2


Relay = Callable[[str, Outcome], Awaitable[None]]


@pytest.fixture(params=["lean", "aiohttp"])
def relay(request: pytest.FixtureRequest) -> Relay:
    return _lean if request.param == "lean" else _aiohttp


@pytest.fixture
async def through(relay: Relay) -> AsyncIterator[Callable[[Script], Awaitable[Outcome]]]:
    servers: list[asyncio.Server] = []

    async def run(script: Script) -> Outcome:
        server, url = await _engine(script)
        servers.append(server)
        outcome = Outcome()
        await asyncio.wait_for(relay(url, outcome), GUARD_S)
        return outcome

    yield run
    for server in servers:
        server.close()


@pytest.mark.parametrize(
    ("script", "status"),
    [
        ([_role(), _vllm_error(500), DONE], 500),  # vLLM: a chat whose decode could not load its KV
        ([_vllm_error(500), DONE], 500),  # the same completion stream
        ([_role(0), _role(1), _sglang_error(503), DONE], 503),  # two choices' role chunks, SGLang's shape
    ],
    ids=["chat", "completion", "sglang-n2"],
)
async def test_a_stream_opening_with_a_5xx_error_event_fails_the_try(
    through: Callable[[Script], Awaitable[Outcome]], script: Script, status: int
) -> None:
    outcome = await through(script)
    assert outcome.failed is not None and outcome.result is None
    assert outcome.failed.status == status
    assert not outcome.failed.fatal and "error event" in outcome.failed.reason
    assert outcome.firsts == 0


async def test_a_4xx_error_event_reaches_the_client(through: Callable[[Script], Awaitable[Outcome]]) -> None:
    script: Script = [_role(), _vllm_error(400, "This model's maximum context length is 8 tokens."), DONE]
    outcome = await through(script)
    assert outcome.failed is None and outcome.result is not None and outcome.result.completed
    assert outcome.body == b"".join(x for x in script if isinstance(x, bytes))
    assert outcome.firsts == 1


async def test_an_error_after_content_is_relayed_as_before(
    through: Callable[[Script], Awaitable[Outcome]],
) -> None:
    script: Script = [_role(), _content("Hi"), _vllm_error(500), DONE]
    outcome = await through(script)
    assert outcome.failed is None and outcome.result is not None
    assert outcome.body == b"".join(x for x in script if isinstance(x, bytes))


async def test_the_role_chunk_waits_for_the_first_token_and_so_does_the_first_byte(relay: Relay) -> None:
    # The first byte the router counts (TTFT, on_first) is the first byte the client gets.
    token = asyncio.Event()
    script: Script = [_role(), token, _content("Hi"), DONE]
    server, url = await _engine(script)
    outcome = Outcome()
    async with server:
        exchange = asyncio.create_task(asyncio.wait_for(relay(url, outcome), GUARD_S))
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(asyncio.shield(outcome.sent.wait()), 0.2)
        assert outcome.firsts == 0
        token.set()
        await exchange
    assert outcome.body == b"".join(x for x in script if isinstance(x, bytes))
    assert outcome.firsts == 1
    assert outcome.result is not None and outcome.result.completed


def test_the_verdicts_on_openings() -> None:
    assert judge_opening(_role(), chunked=False) == "hold"
    assert judge_opening(_role() + b'data: {"id":', chunked=False) == "hold"  # the next event still arriving
    assert judge_opening(b"%x\r\n%b\r\n" % (len(_role()), _role()), chunked=True) == "hold"
    flat = _event({"object": "error", "message": "m", "type": "t", "param": None, "code": 502}, spaced=True)
    assert judge_opening(flat, chunked=False) == ErrorEvent(502, "m")
    assert judge_opening(_event({"error": {"message": "no code"}}), chunked=False) == "relay"
    assert judge_opening(_content('say "role"'), chunked=False) == "relay"
    assert judge_opening(_role() + b": keep-alive\n\n", chunked=False) == "relay"
