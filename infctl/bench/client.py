"""The benchmark's HTTP client: built in one place, one streamed request at a time into a record.

aiohttp, not httpx: on this machine a null SSE server answered ~3,300 requests/s through aiohttp and
~330 through httpx 0.28 (same loop, same concurrency; see benchmarks/bench_client_ceiling.py).
The read loop only timestamps network reads; :mod:`infctl.bench.sse` parses them afterwards.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

import aiohttp
from multidict import CIMultiDict
from yarl import URL

from infctl.bench.records import RequestRecord
from infctl.bench.sse import StreamOutcome, parse_json_response, parse_stream
from infctl.bench.workloads.base import RequestSpec
from infctl.errors import EngineError

Api = Literal["completions", "chat"]
PATHS: dict[str, str] = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}
Clock = Callable[[], float]


def make_session(
    *, connector: aiohttp.BaseConnector | None = None, max_connections: int = 0
) -> aiohttp.ClientSession:
    """The one place bench clients are built; tests may pass their own ``connector``.

    ``max_connections`` 0 means unlimited: an open-loop load must never queue inside the client.
    """
    return aiohttp.ClientSession(
        connector=connector
        or aiohttp.TCPConnector(limit=max_connections, limit_per_host=0, ttl_dns_cache=300),
        auto_decompress=False,
        cookie_jar=aiohttp.DummyCookieJar(),
        # Engines are reached directly; an operator's HTTP(S)_PROXY must not sit in the measurement.
        trust_env=False,
        timeout=aiohttp.ClientTimeout(total=None),
    )


@dataclass(frozen=True)
class Target:
    """Where and how requests go."""

    url: str
    """Full endpoint URL, e.g. ``http://127.0.0.1:8000/v1/completions``."""
    api: Api
    model: str
    headers: Mapping[str, str] = field(default_factory=dict)
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    """Merged into every body last, so it may override anything (``{"ignore_eos": true}``)."""
    timeout_s: float = 600.0

    def body(self, spec: RequestSpec) -> bytes:
        body: dict[str, Any] = {"model": self.model}
        if self.api == "chat":
            body["messages"] = (
                spec.messages
                if spec.messages is not None
                else [{"role": "user", "content": spec.prompt or ""}]
            )
        else:
            body["prompt"] = spec.prompt if spec.prompt is not None else ""
        body["max_tokens"] = spec.max_tokens
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
        body.update(self.extra_body)
        return json.dumps(body, separators=(",", ":")).encode()

    def request_headers(self) -> CIMultiDict[str]:
        """Built once per run: aiohttp would otherwise rebuild a header multidict for every request."""
        base = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        return CIMultiDict({**base, **self.headers})

    @cached_property
    def parsed_url(self) -> URL:
        return URL(self.url)

    @cached_property
    def timeout(self) -> aiohttp.ClientTimeout:
        return aiohttp.ClientTimeout(total=self.timeout_s)


async def send(
    session: aiohttp.ClientSession,
    target: Target,
    headers: CIMultiDict[str],
    body: bytes,
    rec: RequestRecord,
    spec_input_tokens: int,
    clock: Clock,
) -> None:
    """Send one request and fill ``rec`` (times, tokens, error). Never raises except on cancellation."""
    reads: list[tuple[float, bytes]] = []
    outcome: StreamOutcome | None = None
    url, timeout = target.parsed_url, target.timeout
    rec.sent_s = clock()
    try:
        async with session.post(url, data=body, headers=headers, timeout=timeout) as resp:
            rec.status = resp.status
            if resp.status != 200:
                detail = await resp.content.read(300)
                rec.end_s = clock()
                _fail(rec, "http_status", f"HTTP {resp.status}: {_snippet(detail)}")
                return
            if resp.content_type == "application/json":
                raw = await resp.read()
                rec.end_s = clock()
                outcome = parse_json_response(rec.end_s, raw)
            else:
                async for data in resp.content.iter_any():
                    reads.append((clock(), data))
    except TimeoutError:
        rec.end_s = clock()
        _fail(rec, "timeout", f"no complete answer within {target.timeout_s:g} s ({len(reads)} reads)")
        return
    except aiohttp.ClientError as e:
        rec.end_s = clock()
        if rec.status is None:
            _fail(rec, "connection", f"{type(e).__name__}: {e}")
        else:
            _fail(rec, "truncated_stream", f"{type(e).__name__} after {len(reads)} reads")
        return
    if outcome is None:
        rec.end_s = clock()
        outcome = parse_stream(reads)
    _fill(rec, outcome, spec_input_tokens)


def _fill(rec: RequestRecord, out: StreamOutcome, spec_input_tokens: int) -> None:
    rec.chunk_times = out.content_times
    usage = out.usage or {}
    prompt = usage.get("prompt_tokens")
    rec.input_tokens = prompt if isinstance(prompt, int) else spec_input_tokens
    completion = usage.get("completion_tokens")
    rec.output_from_usage = isinstance(completion, int)
    rec.output_tokens = completion if isinstance(completion, int) else len(out.content_times)
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict) and isinstance(details.get("cached_tokens"), int):
        rec.cached_tokens = details["cached_tokens"]
    if out.error is not None:
        _fail(rec, "in_stream_error", out.error[:300])
    elif not out.complete:
        _fail(rec, "truncated_stream", f"stream ended after {out.events} events without [DONE]")


def _fail(rec: RequestRecord, error: Any, detail: str) -> None:
    rec.error = error
    rec.error_detail = detail


def _snippet(body: bytes) -> str:
    text = body.decode("utf-8", errors="replace").strip().replace("\n", " ")
    return text[:200] or "(empty body)"


async def resolve_model(session: aiohttp.ClientSession, base_url: str, timeout_s: float = 10.0) -> str:
    """The first model ``GET /v1/models`` lists; EngineError with the URL when there is none."""
    url = base_url.rstrip("/") + "/v1/models"
    try:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=timeout_s)) as resp:
            if resp.status != 200:
                raise EngineError(f"GET {url} answered HTTP {resp.status}", hint="pass --model NAME")
            data = await resp.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError, ValueError) as e:
        raise EngineError(
            f"GET {url}: {type(e).__name__}: {e}",
            hint="check that the server is running and --url is right, or pass --model NAME",
        ) from None
    models = data.get("data") if isinstance(data, dict) else None
    if not models or not isinstance(models[0], dict) or "id" not in models[0]:
        raise EngineError(f"GET {url} listed no models", hint="pass --model NAME")
    return str(models[0]["id"])


def perf_clock(origin: float | None = None) -> Clock:
    """A monotonic clock in seconds since ``origin`` (now, by default)."""
    base = time.perf_counter() if origin is None else origin
    pc = time.perf_counter
    return lambda: pc() - base
