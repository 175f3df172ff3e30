"""The engine's own latency histograms, read around a measurement window (vLLM's ``/metrics``; ``infctl sim``
serves the same families).

A client times tokens when the API server delivers them, and on a loaded CPU the API server falls behind the
engine and flushes several steps' tokens at once: single gaps are then ~0 or several steps long, and a stream
of 20 concurrent SSE connections costs the client as much CPU as the engine. vLLM stamps every step's outputs
in the engine process (``EngineCoreOutputs.timestamp``) and its ``inter_token_latency_seconds`` histogram is
built from those stamps, so the difference of its ``_sum`` and ``_count`` between two scrapes is the mean step
time of the steps in between, free of the client's and the API server's delays.

``iteration_tokens_total`` (tokens per step) says what those steps were: an interval of pure decode steps of
``b`` sequences has exactly ``b`` tokens per step; a prefill chunk in it, or a stream that finished, moves
that off ``b``. :func:`decode_window` keeps only the pure intervals of a run scraped every few tens of
milliseconds, so no client-side timing decides where the window lies (a loaded API server delivers tokens
late and in bursts, and a window placed by the client's view would straddle prefills or finishes).

``request_prefill_time_seconds`` is the same kind of figure for a lone request: the engine's time from
scheduling it to its first token (:func:`prefill_seconds`), which leaves out what the API server spends on it
before the engine core sees it (tokenizing, setup) and what the client spends after.

Pure apart from :func:`scrape`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise

import aiohttp

from infctl.engines.vllm import (
    INTER_TOKEN_LATENCY,
    ITERATION_TOKENS,
    REQUEST_PREFILL_TIME,
    REQUEST_TIME_PER_OUTPUT_TOKEN,
)
from infctl.telemetry.prometheus import parse_metrics, value

HISTOGRAMS = (INTER_TOKEN_LATENCY, ITERATION_TOKENS, REQUEST_TIME_PER_OUTPUT_TOKEN, REQUEST_PREFILL_TIME)
"""The families read; each contributes its ``_sum`` and ``_count``."""
_WANTED = frozenset(f"{h}{s}" for h in HISTOGRAMS for s in ("_sum", "_count"))

Counters = dict[str, float]
"""``<family>_sum`` / ``<family>_count`` -> value at one scrape (summed over label sets)."""


async def scrape(session: aiohttp.ClientSession, base_url: str) -> Counters | None:
    """The histograms' sums and counts now; None when the engine does not expose them (or cannot answer)."""
    try:
        async with session.get(
            base_url.rstrip("/") + "/metrics", timeout=aiohttp.ClientTimeout(total=10)
        ) as resp:
            if resp.status != 200:
                return None
            text = await resp.text()
    except (aiohttp.ClientError, TimeoutError):
        return None
    families = parse_metrics(text, _WANTED)
    if f"{INTER_TOKEN_LATENCY}_count" not in families or f"{ITERATION_TOKENS}_count" not in families:
        return None
    return {name: value(families, name) for name in _WANTED}


@dataclass(frozen=True)
class HistogramDelta:
    """What one histogram recorded between two scrapes."""

    total: float
    """Increase of ``_sum``."""
    count: float
    """Increase of ``_count`` (observations)."""

    @property
    def mean(self) -> float | None:
        return self.total / self.count if self.count > 0 else None


def delta(before: Mapping[str, float], after: Mapping[str, float], family: str) -> HistogramDelta:
    return HistogramDelta(
        total=after.get(f"{family}_sum", 0.0) - before.get(f"{family}_sum", 0.0),
        count=after.get(f"{family}_count", 0.0) - before.get(f"{family}_count", 0.0),
    )


@dataclass(frozen=True)
class DecodeWindow:
    """The engine's view of the steps where ``batch`` sequences decoded together."""

    steps: int
    """Engine steps counted."""
    seconds_per_step: float
    """Mean inter-token latency over those steps: the mean step time, seconds."""


def decode_window(
    snapshots: Sequence[Mapping[str, float]], batch: int, *, min_steps: int = 4
) -> DecodeWindow | None:
    """The mean step time over the intervals between consecutive ``snapshots`` in which every step decoded
    ``batch`` sequences (tokens = ``batch`` x steps exactly: no prefill chunk, no sequence finished or
    missing); None when those intervals hold fewer than ``min_steps`` steps.

    A step's tokens and inter-token latencies are recorded together (one call in vLLM's API server, one
    in the simulator's), so a scrape never splits a step between two intervals."""
    steps = 0.0
    itl = HistogramDelta(0.0, 0.0)
    for before, after in pairwise(snapshots):
        part = delta(before, after, ITERATION_TOKENS)
        if part.count < 1 or abs(part.total - batch * part.count) > 1e-6:
            continue
        gaps = delta(before, after, INTER_TOKEN_LATENCY)
        steps += part.count
        itl = HistogramDelta(itl.total + gaps.total, itl.count + gaps.count)
    mean = itl.mean
    if steps < min_steps or mean is None or mean <= 0:
        return None
    return DecodeWindow(steps=round(steps), seconds_per_step=mean)


def prefill_seconds(before: Mapping[str, float], after: Mapping[str, float]) -> float | None:
    """The engine's prefill time of the one request that finished between two scrapes; None unless exactly
    one did (another request's, or none yet: the engine records it as the request finishes)."""
    d = delta(before, after, REQUEST_PREFILL_TIME)
    return d.total if abs(d.count - 1) < 1e-9 and d.total > 0 else None
