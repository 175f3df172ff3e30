"""The hit-rate ceilings: an unbounded cache, one pooled cache under MIN (a bound) and under LRU."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

from hypothesis import given, settings
from hypothesis import strategies as st

from infctl.router import Backend, RequestInfo
from infctl.router.ceiling import ceilings, lru_hits, min_hits, reuse_hits
from infctl.router.replay import Fleet, FluidModel, TraceRequest


def chain(i: int, words: Sequence[int]) -> RequestInfo:
    """A request whose k-th block hash names its whole prefix, as chained block hashes do."""
    hashes = tuple(hash(tuple(words[: k + 1])) for k in range(len(words)))
    return RequestInfo(f"r{i}", prompt_tokens=16 * len(words), block_hashes=hashes)


prompts = st.lists(st.lists(st.integers(0, 2), min_size=1, max_size=4), min_size=1, max_size=7)


def best_possible(requests: Sequence[RequestInfo], capacity: int) -> int:
    """Most leading-run hits any cache of ``capacity`` blocks can get, by trying every store/evict choice."""
    accesses = [(i, h) for i, r in enumerate(requests) for h in r.block_hashes]

    @cache
    def go(k: int, held: frozenset[int], leading: bool) -> int:
        if k == len(accesses):
            return 0
        i, h = accesses[k]
        fresh = k + 1 < len(accesses) and accesses[k + 1][0] != i  # the next access starts a new prompt
        if h in held:
            return int(leading) + go(k + 1, held, fresh or leading)
        stores = [held | {h}] if len(held) < capacity else [held - {v} | {h} for v in held]
        return max(go(k + 1, kept, fresh) for kept in [held, *stores])

    return go(0, frozenset(), True)


def test_reuse_counts_the_leading_blocks_some_earlier_request_sent() -> None:
    a, b, c = chain(0, [1, 2, 3]), chain(1, [1, 2, 4]), chain(2, [5, 2, 3])
    assert reuse_hits([a, b, c]) == 2  # b reuses a's first two; c shares no prefix (its hashes differ)
    got = ceilings([a, b, c], engines=2, blocks=1)
    assert got.capacity_blocks == 2 and got.prompt_tokens == 16 * 9
    assert got.rates()["reuse"] == 2 * 16 / (16 * 9)
    line = got.describe()  # the benchmarks' header: every ceiling's rate, and which one bounds a router
    assert "every block sent before 22.2%" in line and "2 blocks under MIN" in line
    assert "no router can beat it" in line


def test_lru_evicts_the_least_recent_and_the_tail_of_a_prefix_first() -> None:
    a, b = chain(0, [1, 2, 3]), chain(1, [7])
    # 3 blocks of room: b pushes out a's last block, so a again finds its first two.
    assert lru_hits([a, b, chain(2, [1, 2, 3])], 3) == 2
    assert min_hits([a, b, chain(2, [1, 2, 3])], 3) == 3  # MIN does not store b: a comes back first
    assert lru_hits([a, b, chain(2, [1, 2, 3])], 3, skip_one_offs=True) == 3  # nor does the filter


@settings(max_examples=60, deadline=None)
@given(prompts, st.integers(1, 4))
def test_min_is_the_best_any_cache_of_that_size_can_do(words: list[list[int]], capacity: int) -> None:
    requests = [chain(i, w) for i, w in enumerate(words)]
    assert min_hits(requests, capacity) == best_possible(requests, capacity)


@settings(max_examples=100, deadline=None)
@given(prompts, st.integers(1, 6), st.lists(st.integers(0, 1), min_size=7, max_size=7))
def test_no_routing_over_two_lru_engines_beats_the_pooled_min(
    words: list[list[int]], blocks: int, route: list[int]
) -> None:
    requests = [chain(i, w) for i, w in enumerate(words)]
    fleet = Fleet([Backend("e0"), Backend("e1")], FluidModel(cache_tokens=16 * blocks))
    for i, r in enumerate(requests):
        fleet.dispatch(TraceRequest(float(i), r), f"e{route[i]}", "t")
    got = ceilings(requests, engines=2, blocks=blocks)
    assert fleet.result.hit_blocks <= got.pooled_min <= got.reuse
    assert got.pooled_lru <= got.pooled_lru_skip <= got.pooled_min
    if blocks * 2 >= len({h for r in requests for h in r.block_hashes}):
        assert got.pooled_lru == got.pooled_lru_skip == got.pooled_min == got.reuse
