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

The window's figure is the median of those intervals' mean step times (weighted by their steps), not the
pooled mean: a stall of the host lands in one token gap of each stream, in the real engine (a descheduled
process) and in ``infctl sim`` alike (its driver restarts its step clock after falling more than
``RESYNC_SECONDS`` behind, so the lag becomes part of the next gap). Pooled, one 200 ms stall among 100
steps of 5 ms moves the figure by 40%; the median interval ignores stalls until they hit half the
intervals. The pooled mean is kept beside it (:class:`DecodeWindow`), with the intervals it came from.

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
    """The step time, seconds: the median over the intervals between scrapes of each one's mean
    inter-token latency, weighted by its steps (robust to a stalled step, see the module docstring)."""
    pooled_seconds: float = 0.0
    """The mean inter-token latency over all those steps, stalls included, seconds."""
    intervals: int = 0
    """Intervals between scrapes the window is made of."""


def decode_window(
    snapshots: Sequence[Mapping[str, float]], batch: int, *, min_steps: int = 4
) -> DecodeWindow | None:
    """The step time over the intervals between consecutive ``snapshots`` in which every step decoded
    ``batch`` sequences (tokens = ``batch`` x steps exactly: no prefill chunk, no sequence finished or
    missing): their step-weighted median interval mean (see the module docstring); None when those
    intervals hold fewer than ``min_steps`` steps.

    A step's tokens and inter-token latencies are recorded together (one call in vLLM's API server, one
    in the simulator's), so a scrape never splits a step between two intervals."""
    parts: list[tuple[float, float]] = []
    """(mean inter-token latency, steps) of each pure interval."""
    pooled = HistogramDelta(0.0, 0.0)
    for before, after in pairwise(snapshots):
        part = delta(before, after, ITERATION_TOKENS)
        if part.count < 1 or abs(part.total - batch * part.count) > 1e-6:
            continue
        gaps = delta(before, after, INTER_TOKEN_LATENCY)
        if gaps.mean is None:
            continue
        parts.append((gaps.mean, part.count))
        pooled = HistogramDelta(pooled.total + gaps.total, pooled.count + gaps.count)
    steps = sum(n for _, n in parts)
    if steps < min_steps or pooled.mean is None or pooled.mean <= 0:
        return None
    return DecodeWindow(round(steps), weighted_median(parts), pooled.mean, len(parts))


def weighted_median(values: Sequence[tuple[float, float]]) -> float:
    """The median of ``(value, weight)`` pairs: the value at half the total weight (the mean of the two
    values beside it when half falls exactly between them)."""
    ordered = sorted(values)
    half = sum(w for _, w in ordered) / 2
    seen = 0.0
    for i, (v, w) in enumerate(ordered):
        seen += w
        if seen > half + 1e-9:
            return v
        if abs(seen - half) <= 1e-9:
            return (v + ordered[i + 1][0]) / 2 if i + 1 < len(ordered) else v
    return ordered[-1][0]


def prefill_seconds(before: Mapping[str, float], after: Mapping[str, float]) -> float | None:
    """The engine's prefill time of the one request that finished between two scrapes; None unless exactly
    one did (another request's, or none yet: the engine records it as the request finishes)."""
    d = delta(before, after, REQUEST_PREFILL_TIME)
    return d.total if abs(d.count - 1) < 1e-9 and d.total > 0 else None
