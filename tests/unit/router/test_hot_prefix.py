"""Anti-hot-spotting: 90% of requests share a 2k-token system prompt, half of those are conversations.

The replay drives a fluid model of 8 engines (prefill queue drained at a fixed rate, decode time per
output token, LRU prefix cache of engine size). cache_aware must keep every engine within 1.5x its fair
share of prefill work while keeping most of the hit rate; plain longest-prefix must fail the same check
(which proves the check can fail).
"""

from __future__ import annotations

import pytest

from infctl.router import ApproxPrefixIndex, Backend, RouterCore, build_policy
from infctl.router.replay import FluidModel, ReplayResult, TraceRequest, hot_prefix_trace, replay

BACKENDS = [Backend(f"e{i}") for i in range(8)]
MODEL = FluidModel()


@pytest.fixture(scope="module")
def traces() -> dict[float, list[TraceRequest]]:
    return {rate: hot_prefix_trace(1000, rate=rate, seed=7) for rate in (10.0, 40.0, 80.0)}


def run(policy: str, trace: list[TraceRequest]) -> ReplayResult:
    return replay(RouterCore(build_policy(policy)), BACKENDS, trace, MODEL)


def ceiling(trace: list[TraceRequest]) -> float:
    """Hit rate if one engine with an unbounded cache served everything (no routing can do better)."""
    idx, hit, total = ApproxPrefixIndex(10**9), 0, 0
    for t in trace:
        hit += idx.match(t.request.block_hashes).get("x", 0)
        total += t.request.num_blocks
        idx.record("x", t.request.block_hashes)
    return hit / total


@pytest.mark.parametrize("rate", [10.0, 40.0, 80.0])
def test_cache_aware_spreads_a_hot_prefix_and_keeps_the_hits(
    traces: dict[float, list[TraceRequest]], rate: float
) -> None:
    trace = traces[rate]
    aware, rr = run("cache_aware", trace), run("round_robin", trace)
    assert aware.max_share(8) <= 1.5
    assert aware.hit_rate >= 0.9 * ceiling(trace)
    assert aware.hit_rate >= rr.hit_rate + 0.05
    assert aware.ttft_quantile(0.99) <= rr.ttft_quantile(0.99)


@pytest.mark.parametrize("rate", [10.0, 80.0])
def test_plain_longest_prefix_hot_spots(traces: dict[float, list[TraceRequest]], rate: float) -> None:
    naive = run("prefix", traces[rate])
    assert naive.max_share(8) > 3.0
    assert naive.prefill_tokens.most_common(1)[0][1] > 0.4 * sum(naive.prefill_tokens.values())
