"""Requests the router will not read, over raw sockets on both fronts (issue 18): a transfer coding it does
not decode is refused, never forwarded with the coding ignored; a head that is not valid HTTP/1.1 is a 400
(on the lean front in the OpenAI shape without the client's bytes echoed back; on aiohttp's, aiohttp's own
page, which has no public hook: issue 20). Both close the connection."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from infctl.router.snapshot import Backend
from infctl.telemetry.prometheus import parse_metrics, value

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
BODY = json.dumps({"model": MODEL, "prompt": "a b c", "max_tokens": 2}).encode()
CHUNKED = b"%x\r\n%s\r\n0\r\n\r\n" % (len(BODY), BODY)
MARKER = b"SECRET-CLIENT-BYTES"


async def exchange(url: str, raw: bytes) -> bytes:
    """Send ``raw`` and read until the router closes the connection (a 30 s guard against a hang)."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(raw)
    await writer.drain()
    async with asyncio.timeout(30):
        answer = await reader.read()  # to EOF: the router must close
    writer.close()
    return answer


async def engine_requests(url: str) -> float:
    async with asyncio.timeout(30):
        reader, writer = await asyncio.open_connection(*url.removeprefix("http://").split(":"))
        writer.write(b"GET /metrics HTTP/1.1\r\nhost: e\r\nconnection: close\r\n\r\n")
        text = (await reader.read()).partition(b"\r\n\r\n")[2].decode()
        writer.close()
    return value(parse_metrics(text), "vllm:request_success_total")


@pytest.mark.parametrize(
    ("coding", "status"),
    [
        (b"gzip, chunked", 501),
        (b"deflate, chunked", 501),
        (b"identity, chunked", 501),
        (b"x-custom, chunked", 501),
        (b"chunked\r\ntransfer-encoding: chunked", 400),  # chunked twice (two fields)
        (b"chunked, gzip", 400),  # chunked not last: no framing at all
    ],
)
async def test_a_transfer_coding_the_router_cannot_decode_is_refused_not_ignored(
    start_sim: Callable[..., Awaitable[Any]],
    start_router: Callable[..., Awaitable[str]],
    coding: bytes,
    status: int,
    server: str,
) -> None:
    sim = await start_sim()
    url = await start_router([Backend(id="e", url=sim.urls[0])], policy="round_robin")
    for path in (b"/v1/completions", b"/admin/backends"):
        answer = await exchange(
            url,
            b"POST %s HTTP/1.1\r\nhost: r\r\ncontent-type: application/json\r\n"
            b"transfer-encoding: %s\r\n\r\n%s" % (path, coding, CHUNKED),
        )
        head, _, body = answer.partition(b"\r\n\r\n")
        if server == "aiohttp" and status == 400:  # aiohttp's parser refuses it first, with its own page
            assert head.split(b" ")[1] == b"400", (path, answer[:200])  # (HTTP/1.0: closed, as read)
            continue
        assert b"connection: close" in head.lower()
        assert head.startswith(b"HTTP/1.1 %d " % status), (path, answer[:200])
        error = json.loads(body)["error"]
        assert error["code"] == status
        assert status == 400 or "Transfer-Encoding" in error["message"]
    assert await engine_requests(sim.urls[0]) == 0  # nothing was forwarded
    # Plain chunked is still read and served.
    plain = await exchange(
        url,
        b"POST /v1/completions HTTP/1.1\r\nhost: r\r\ncontent-type: application/json\r\n"
        b"transfer-encoding: chunked\r\nconnection: close\r\n\r\n" + CHUNKED,
    )
    assert plain.startswith(b"HTTP/1.1 200 ") and await engine_requests(sim.urls[0]) == 1


@pytest.mark.parametrize(
    "head",
    [
        b"POST /v1/completions HTTP/1.1\r\nhost: r\r\nx-bad: a\x01" + MARKER + b"A" * 150 + b"\r\n",
        b"GET /health HTTP/1.1\r\nhost: r\r\nbad header " + MARKER + b": x\r\n",
        b"GET /health HTTP/1.1\r\nhost: r\r\nx-long: " + MARKER + b"B" * 9000 + b"\r\n",  # over 8 KiB
    ],
)
async def test_an_unparseable_head_gets_an_http_1_1_answer_without_the_clients_bytes(
    start_router: Callable[..., Awaitable[str]], head: bytes, server: str
) -> None:
    url = await start_router([Backend(id="e", url="http://127.0.0.1:9")])
    answer = await exchange(url, head + b"content-length: 2\r\n\r\n{}")
    status_head, _, body = answer.partition(b"\r\n\r\n")
    if server == "aiohttp":  # aiohttp's own answer (a 400 that closes), served on
        assert status_head.split(b" ")[1] == b"400"  # (its HTTP/1.0 answer: closed, as read to EOF)
        health = await exchange(url, b"GET /health HTTP/1.1\r\nhost: r\r\nconnection: close\r\n\r\n")
        assert health.startswith(b"HTTP/1.1 200 ")
        return
    assert status_head.startswith(b"HTTP/1.1 400 "), answer[:200]
    assert b"connection: close" in status_head.lower()
    assert MARKER not in answer and b"AAAA" not in answer and b"BBBB" not in answer
    error = json.loads(body)["error"]
    assert error["code"] == 400 and error["type"] == "BadRequestError"
    # The router serves on.
    health = await exchange(url, b"GET /health HTTP/1.1\r\nhost: r\r\nconnection: close\r\n\r\n")
    assert health.startswith(b"HTTP/1.1 200 ")
