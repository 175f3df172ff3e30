"""Measuring a live OpenAI-compatible engine: TTFT of lone requests, ITL of concurrent streams.

aiohttp, as the benchmark's client (it costs the shared CPU less per SSE chunk than httpx, and on a two-core
machine the client competes with the engine it measures). Every request streams ``/v1/completions`` with
``ignore_eos`` so outputs have exactly the length asked for, and ``stream_options.include_usage`` so the
prompt length is the engine's own token count. A token is any chunk carrying a choice, even with empty text
(a random-weights model emits tokens that decode to nothing; each is still one engine step).

Prompts are random words from ``infctl.tokens``' list, seeded per request, so no two share a cached prefix;
the engine's ``cached_tokens`` (when it reports them) is kept with each sample anyway.
"""

from __future__ import annotations

import asyncio
import json
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from infctl.engines.vllm import CACHE_CONFIG_INFO, REQUEST_PREFILL_TIME
from infctl.errors import EngineError
from infctl.sim.calib_counters import Counters, decode_window, delta, prefill_seconds, scrape
from infctl.sim.calib_fit import ItlSample, TtftSample
from infctl.telemetry.prometheus import parse_metrics
from infctl.tokens import _WORDS

Clock = Callable[[], float]
"""Seconds from an arbitrary origin (``time.perf_counter``)."""


def make_session(*, connector: aiohttp.BaseConnector | None = None) -> aiohttp.ClientSession:
    """The one place calibration clients are built; tests may pass their own ``connector``."""
    return aiohttp.ClientSession(
        connector=connector or aiohttp.TCPConnector(limit=0),
        # The engine is reached directly; an operator's HTTP(S)_PROXY must not sit in the measurement.
        trust_env=False,
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=5),
    )


@dataclass(frozen=True)
class StreamResult:
    """One streamed completion as the client saw it."""

    token_times: tuple[float, ...]
    """Clock reading at each chunk carrying a choice."""
    tokens_seen: tuple[int, ...] = ()
    """Tokens received up to and including each chunk (vLLM's ``token_ids`` when it sends them, else one per
    chunk); empty means one per chunk."""
    sent_at: float = 0.0
    prompt_tokens: int = -1
    completion_tokens: int = 0
    cached_tokens: int = 0

    @property
    def ttft(self) -> float:
        return self.token_times[0] - self.sent_at

    def counts(self) -> tuple[int, ...]:
        return self.tokens_seen or tuple(range(1, len(self.token_times) + 1))

    def time_per_token(self, start: float = float("-inf"), end: float = float("inf")) -> float | None:
        """Average time per token between the first and last chunk inside [start, end]; None when fewer
        than two tokens apart. Tokens, not chunks: vLLM merges several steps' tokens into one chunk when
        its API server falls behind, and then single gaps are ~0 or a multiple of the step."""
        inside = [(t, n) for t, n in zip(self.token_times, self.counts(), strict=True) if start <= t <= end]
        if len(inside) < 2 or inside[-1][1] - inside[0][1] < 2:
            return None
        return (inside[-1][0] - inside[0][0]) / (inside[-1][1] - inside[0][1])


@dataclass(frozen=True)
class EngineInfo:
    """What the engine says about itself (None where it does not say)."""

    model: str
    max_model_len: int | None = None
    block_size: int | None = None
    num_gpu_blocks: int | None = None
    kv_bytes_per_token: int | None = None
    prefix_caching: bool | None = None
    labels: dict[str, str] = field(default_factory=dict)
    """``cache_config_info`` labels as found (vLLM)."""


def prompt_words(n: int, seed: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(_WORDS) for _ in range(n))


class EngineClient:
    """Streams completions to one engine; ``clock`` is injectable for tests."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        base_url: str,
        model: str,
        *,
        timeout_s: float = 300.0,
        clock: Clock = time.perf_counter,
    ) -> None:
        self.session, self.base_url, self.model = session, base_url.rstrip("/"), model
        self.timeout = aiohttp.ClientTimeout(total=timeout_s)
        self.clock = clock

    async def stream(self, prompt: str, max_tokens: int) -> StreamResult:
        body = {
            "model": self.model,
            "prompt": prompt,
            "max_tokens": max_tokens,
            "stream": True,
            "ignore_eos": True,
            "temperature": 0.0,
            "stream_options": {"include_usage": True},
            # vLLM adds each chunk's token ids (other engines ignore it): how many tokens a chunk carries.
            "return_token_ids": True,
        }
        url = f"{self.base_url}/v1/completions"
        times: list[float] = []
        seen: list[int] = []
        exact = True
        usage: dict[str, Any] = {}
        for attempt in (1, 2):
            sent = self.clock()
            try:
                async with self.session.post(url, json=body, timeout=self.timeout) as resp:
                    if resp.status != 200:
                        text = (await resp.text())[:200]
                        raise EngineError(f"POST {url} answered {resp.status}: {text}", hint=_HINT)
                    async for raw in resp.content:
                        now = self.clock()
                        if not raw.startswith(b"data: {"):
                            continue
                        chunk = json.loads(raw[6:])
                        if chunk.get("choices"):
                            times.append(now)
                            ids = chunk["choices"][0].get("token_ids")
                            exact = exact and isinstance(ids, list)
                            n = len(ids) if isinstance(ids, list) else 1
                            seen.append((seen[-1] if seen else 0) + n)
                        if chunk.get("usage"):
                            usage = chunk["usage"]
                break
            except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
                # A pooled keep-alive connection the server closed just as it was reused (uvicorn drops
                # idle ones after 5 s): nothing was generated, so sending once more measures the same thing.
                if attempt == 2 or times:
                    raise EngineError(f"POST {url} failed: {exc or type(exc).__name__}", hint=_HINT) from None
            except (aiohttp.ClientError, TimeoutError) as exc:
                raise EngineError(f"POST {url} failed: {exc or type(exc).__name__}", hint=_HINT) from None
        if not times:
            raise EngineError(f"POST {url} streamed no tokens", hint=_HINT)
        details = usage.get("prompt_tokens_details") or {}
        return StreamResult(
            token_times=tuple(times),
            tokens_seen=tuple(seen) if exact else (),
            sent_at=sent,
            prompt_tokens=int(usage.get("prompt_tokens", -1)),
            completion_tokens=int(usage.get("completion_tokens", len(times))),
            cached_tokens=int(details.get("cached_tokens") or 0),
        )


_HINT = "check --url and --model: the engine must serve /v1/completions with streaming"


async def measure_ttft(
    client: EngineClient,
    lengths: Sequence[int],
    *,
    repeats: int,
    seed: int,
    first_repeat: int = 0,
    engine_side: bool = True,
) -> list[TtftSample]:
    """``repeats`` lone requests per prompt length (one output token each), lengths interleaved so that a
    burst of outside load does not fall on one length only; repeat ``r`` counts from ``first_repeat`` (its
    prompts differ from every other repeat's).

    With ``engine_side`` and an engine that exposes vLLM's histograms, ``/metrics`` is read around each
    request for the engine's own prefill time (:attr:`TtftSample.engine_prefill_s`)."""
    samples: list[TtftSample] = []
    for r in range(first_repeat, first_repeat + repeats):
        for i, n in enumerate(lengths):
            before = await scrape(client.session, client.base_url) if engine_side else None
            res = await client.stream(prompt_words(n, seed * 1_000_003 + r * 1009 + i), 1)
            prefill = None if before is None else await _engine_prefill(client, before)
            tokens = res.prompt_tokens if res.prompt_tokens > 0 else n
            samples.append(TtftSample(tokens, res.ttft, res.cached_tokens, prefill))
    return samples


async def _engine_prefill(client: EngineClient, before: Counters, tries: int = 5) -> float | None:
    """The lone request's prefill time as the engine recorded it (it may record it just after the stream
    ends: read again a few times)."""
    for _ in range(tries):
        after = await scrape(client.session, client.base_url)
        if after is None:
            return None
        found = prefill_seconds(before, after)
        if found is not None or delta(before, after, REQUEST_PREFILL_TIME).count > 1:
            return found
        await asyncio.sleep(POLL_S)
    return None


async def measure_itl(
    client: EngineClient,
    batch: int,
    context: int,
    output_tokens: int,
    *,
    seed: int,
    engine_side: bool = True,
) -> ItlSample | None:
    """Start ``batch`` streams at once; the time per token while all of them decode.

    With ``engine_side``, and an engine that exposes vLLM's histograms, the figure is the engine's own mean
    step time over the steps where the whole batch decoded (:mod:`infctl.sim.calib_counters`; ``/metrics``
    is read every ``POLL_S`` during the run); None when there were too few such steps.

    Otherwise it is the client's view: each stream's average time per token over the window from the last
    stream's first token to the first stream's last (:meth:`StreamResult.time_per_token`, counted in tokens
    because a loaded API server delivers several steps' tokens in one chunk), the median over streams. None
    when the streams never decode together.
    """
    streams = asyncio.ensure_future(
        asyncio.gather(
            *(client.stream(prompt_words(context, seed * 7919 + j), output_tokens) for j in range(batch))
        )
    )
    snapshots: list[Counters] | None = None
    if engine_side:
        snapshots = await _poll_counters(client, streams)
    results = await streams
    prompt = statistics.mean(r.prompt_tokens if r.prompt_tokens > 0 else context for r in results)
    if snapshots is not None:
        found = decode_window(snapshots, batch)
        if found is None:
            return None
        return ItlSample(batch, prompt + output_tokens / 2, found.seconds_per_step, source="engine",
                         pooled_seconds=found.pooled_seconds)  # fmt: skip
    start = max(r.token_times[0] for r in results)
    end = min(r.token_times[-1] for r in results)
    per_stream = [t for r in results if (t := r.time_per_token(start, end)) is not None]
    if not per_stream:
        return None
    return ItlSample(batch, prompt + output_tokens / 2, statistics.median(per_stream), source="client")


POLL_S = 0.03
"""Pause between two reads of the engine's ``/metrics`` while ITL streams run, seconds."""


async def _poll_counters(client: EngineClient, streams: asyncio.Future[Any]) -> list[Counters] | None:
    """The engine's counters read every ``POLL_S`` until ``streams`` end; None if it does not expose them."""
    snapshots: list[Counters] = []
    while not streams.done():
        snap = await scrape(client.session, client.base_url)
        if snap is None:
            return None
        snapshots.append(snap)
        await asyncio.wait((streams,), timeout=POLL_S)
    return snapshots


async def engine_info(session: aiohttp.ClientSession, base_url: str, model: str | None) -> EngineInfo:
    """The served model (the first one when ``model`` is None) and its limits from /v1/models and /metrics."""
    base = base_url.rstrip("/")
    try:
        async with session.get(f"{base}/v1/models", timeout=aiohttp.ClientTimeout(total=10)) as resp:
            models = await resp.json(content_type=None) if resp.status == 200 else None
        async with session.get(f"{base}/metrics", timeout=aiohttp.ClientTimeout(total=10)) as resp:
            metrics = await resp.text() if resp.status == 200 else ""
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        raise EngineError(
            f"cannot reach {base}: {exc or type(exc).__name__}",
            hint="start the engine first, and pass its base URL (http://host:port)",
        ) from None
    cards = models.get("data") if isinstance(models, dict) else None
    if not cards:
        raise EngineError(
            f"GET {base}/v1/models listed no model", hint="is this an OpenAI-compatible engine?"
        )
    card = next((c for c in cards if c.get("id") == model), None) if model else cards[0]
    if card is None:
        served = ", ".join(str(c.get("id")) for c in cards)
        raise EngineError(
            f"model {model!r} is not served at {base} (serving: {served})", hint=f"use --model {served}"
        )
    labels, engines = cache_config_labels(metrics)
    total_blocks = _int(labels.get("num_gpu_blocks"))
    return EngineInfo(
        model=str(card["id"]),
        max_model_len=_int(card.get("max_model_len")),
        block_size=_int(labels.get("block_size")),
        # vLLM 0.32 writes the sum over its data-parallel engines on each engine's sample
        # (v1/engine/core_client.py _apply_ready_response): one engine's pool is the share.
        num_gpu_blocks=total_blocks // engines if total_blocks else None,
        kv_bytes_per_token=_kv_bytes_per_token(labels),
        prefix_caching=None
        if "enable_prefix_caching" not in labels
        else labels["enable_prefix_caching"] == "True",
        labels=labels,
    )


def cache_config_labels(metrics_text: str) -> tuple[dict[str, str], int]:
    """Labels of vLLM's first ``cache_config_info`` sample (empty when absent), and how many engines wrote
    one (one per data-parallel engine)."""
    families = parse_metrics(metrics_text, frozenset({CACHE_CONFIG_INFO}))
    samples = families.get(CACHE_CONFIG_INFO, ())
    return (dict(samples[0].labels) if samples else {}), max(1, len(samples))


def _kv_bytes_per_token(labels: dict[str, str]) -> int | None:
    size, tokens = _int(labels.get("kv_cache_memory_bytes")), _int(labels.get("kv_cache_size_tokens"))
    return size // tokens if size and tokens else None


def _int(raw: object) -> int | None:
    try:
        return int(float(str(raw))) if raw is not None else None
    except ValueError:
        return None
