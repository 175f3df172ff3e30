"""Routing on the estimate in front of the model's tokenizer, and the exact counts that keep it honest.

With the model's tokenizer (exact) a 2,000-token prompt costs ~2-10 ms of CPU before it can be routed. The
router needs exact ids only for the precise index (matched against the engines' KV events); counts only
for threshold tests. So, unless the precise index is in use, a request is routed on the estimate when the
band (``infctl.tokenization.band``) shows no threshold could go the other way, and counted exactly after
it is on its way, in a worker thread: that count widens the band and feeds ``/metrics``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import Any

from infctl.router.core import RouterCore
from infctl.router.metrics import RouterMetrics
from infctl.router.policies import PDSettings
from infctl.router.requests import BadRequest, EstimatePlan, exact_count
from infctl.router.snapshot import RequestInfo
from infctl.tokenization import Tokenizer, TokenizerError
from infctl.tokenization.band import RatioBand

MAX_PENDING = 2
"""Exact counts in flight at once; beyond it a request goes uncounted: the band learns from a sample."""
CPU_SHARE = 0.02
"""Of one core, what the counts after routing may spend on average (a token bucket of CPU seconds): they
must not compete with serving, and a sample is enough, since a prompt left uncounted adds its estimate
scaled by the ratio the counted ones showed (``RatioBand.scaled``). At 40 req/s of 2,000-token prompts a
~1.7 ms tokenizer counts ~1 in 3."""


class Estimating:
    def __init__(
        self, tokenizer: Tokenizer, metrics: RouterMetrics, *, clock: Callable[[], float] | None = None
    ) -> None:
        self.tokenizer = tokenizer
        self.metrics = metrics
        self._clock = clock
        """Seconds, for the CPU budget's refill (default: the event loop's clock)."""
        self.band = RatioBand()
        self.pending = 0
        self._credit = CPU_SHARE  # CPU seconds the counts may spend now
        self._as_of: float | None = None

    def plan(self, core: RouterCore, pd: PDSettings | None) -> EstimatePlan | None:
        """How this request may be routed on the estimate; None: on the exact ids (a tokenizer that is an
        estimate itself, or a policy matching against the engines' KV events)."""
        if not self.tokenizer.exact:
            return None
        index = core.policy.index
        if index == "precise" or (index == "auto" and core.precise.any_source):
            return None
        buckets = core.policy.buckets
        bounds = [b.max_tokens for b in buckets.buckets if b.max_tokens is not None] if buckets else []
        if pd is not None:
            bounds.append(pd.min_uncached_tokens)
        return EstimatePlan(self.band, tuple(bounds))

    def count_later(
        self, loop: asyncio.AbstractEventLoop, body: Mapping[str, Any], chat: bool, info: RequestInfo
    ) -> None:
        """Count an estimated request exactly in a worker thread, then widen the band to it. Called as its
        handler ends (a stream is out by then; a whole answer is written as the handler returns, and the
        thread starts on the next loop iteration), also for one refused after admission (503 or 502): its
        tokens were demand, as for a request counted while routing."""
        if not self.tokenizer.exact:
            return
        if not info.estimated:
            self.metrics.exact_counts["routing"] += 1
            return
        now = self._clock() if self._clock else loop.time()
        if self._as_of is not None:
            self._credit = min(CPU_SHARE, self._credit + CPU_SHARE * (now - self._as_of))
        self._as_of = now
        if self.pending >= MAX_PENDING or self._credit <= 0:
            self.metrics.exact_counts["skipped"] += 1
            self.metrics.prompt_tokens += self.band.scaled(info.prompt_chars, info.prompt_tokens)
            return
        self.pending += 1
        loop.call_soon(self._start, loop, body, chat, info)

    def _start(
        self, loop: asyncio.AbstractEventLoop, body: Mapping[str, Any], chat: bool, info: RequestInfo
    ) -> None:
        work = loop.run_in_executor(None, _count, body, chat, self.tokenizer)
        work.add_done_callback(lambda done: self._observe(done, info.prompt_chars, info.prompt_tokens))

    def _observe(self, done: asyncio.Future[tuple[int, float] | None], chars: int, estimate: int) -> None:
        self.pending -= 1
        result = None if done.cancelled() or done.exception() else done.result()
        if result is None:  # the model's template refused what the estimate took: the engine will say so
            self.metrics.prompt_tokens += estimate
            return
        exact, cpu_s = result
        self._credit -= cpu_s
        self.metrics.prompt_tokens += exact
        self.metrics.exact_counts["background"] += 1
        if self.band.observe(chars, estimate, exact):
            self.metrics.estimate_misses += 1


def _count(body: Mapping[str, Any], chat: bool, tokenizer: Tokenizer) -> tuple[int, float] | None:
    """(exact count, CPU seconds it took) in a worker thread. The prompt's characters are the request's
    (``RequestInfo.prompt_chars``), read as it arrived: its messages are not read again for them."""
    began = time.thread_time()
    try:
        exact = exact_count(body, chat=chat, tokenizer=tokenizer)
    except (BadRequest, TokenizerError):  # the engine's to report: the request was routed already
        return None
    return exact, time.thread_time() - began
