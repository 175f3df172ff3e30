"""The greedy full-knowledge baseline: true caches and queues, no future (not a ceiling: see ceiling.py)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infctl.router import Backend, RequestInfo, RouterCore, build_policy
from infctl.router.ceiling import ceilings
from infctl.router.oracle import OracleSettings, oracle_choice, oracle_replay
from infctl.router.replay import Fleet, FluidModel, TraceRequest, hot_prefix_trace, replay

BACKENDS = [Backend(f"e{i}") for i in range(4)]
MODEL = FluidModel(prefill_tokens_per_s=10_000, cache_tokens=100_000)


def req(i: int, blocks: tuple[int, ...]) -> RequestInfo:
    return RequestInfo(f"r{i}", prompt_tokens=16 * len(blocks), block_hashes=blocks)


def test_it_follows_the_true_cache_and_leaves_it_when_the_queue_costs_more() -> None:
    fleet = Fleet(BACKENDS, MODEL)
    fleet.dispatch(TraceRequest(0.0, req(0, tuple(range(100)))), "e2", "seed")
    fleet.engines["e2"].queue_until = 0.0  # its prefill is done
    again = TraceRequest(1.0, req(1, tuple(range(100))))
    assert oracle_choice(fleet, again, OracleSettings()) == ("e2", 100)
    fleet.engines["e2"].queue_until = 1.0 + 1600 / MODEL.prefill_tokens_per_s + 0.01  # > 1600 tokens queued
    assert oracle_choice(fleet, again, OracleSettings())[0] != "e2"
    assert oracle_choice(fleet, again, OracleSettings(load_weight=0.0)) == ("e2", 100)


@settings(max_examples=100, deadline=None)
@given(
    held=st.lists(st.integers(0, 8), min_size=4, max_size=4),
    queued=st.lists(st.floats(0, 2.0), min_size=4, max_size=4),
    weight=st.floats(0, 2),
)
def test_the_choice_minimises_uncached_plus_weighted_queue(
    held: list[int], queued: list[float], weight: float
) -> None:
    fleet = Fleet(BACKENDS, MODEL)
    for b, n in zip(BACKENDS, held, strict=True):
        fleet.truth.record(b.id, list(range(n)))
    for b, q in zip(BACKENDS, queued, strict=True):
        fleet.engines[b.id].queue_until = q
    item = TraceRequest(0.0, req(0, tuple(range(8))))
    chosen, got = oracle_choice(fleet, item, OracleSettings(weight))

    def cost(i: int) -> float:
        return 16 * (8 - held[i]) + weight * queued[i] * MODEL.prefill_tokens_per_s

    assert cost(int(chosen[1:])) <= min(cost(i) for i in range(4)) + 1e-6
    assert got == held[int(chosen[1:])]


@pytest.mark.parametrize("rate", [10.0, 80.0])
def test_cache_aware_reaches_ninety_percent_of_the_oracle_hit_rate(rate: float) -> None:
    trace = hot_prefix_trace(600, rate=rate, seed=3)
    eight = [Backend(f"e{i}") for i in range(8)]
    oracle = oracle_replay(eight, trace, FluidModel())
    aware = replay(RouterCore(build_policy("cache_aware")), eight, trace, FluidModel())
    rr = replay(RouterCore(build_policy("round_robin")), eight, trace, FluidModel())
    assert oracle.hit_rate > rr.hit_rate
    assert aware.hit_rate >= 0.9 * oracle.hit_rate
    assert sum(oracle.requests.values()) == len(trace) and set(oracle.reasons) <= {
        "oracle_hit",
        "oracle_miss",
    }


def test_neither_the_greedy_baseline_nor_cache_aware_passes_the_pooled_min_ceiling() -> None:
    trace = hot_prefix_trace(400, rate=40.0, seed=5)
    four = [Backend(f"e{i}") for i in range(4)]
    model = FluidModel(cache_tokens=16 * 300)  # small caches, so capacity binds
    bound = ceilings([t.request for t in trace], engines=4, blocks=300)
    for result in (
        oracle_replay(four, trace, model),
        replay(RouterCore(build_policy("cache_aware")), four, trace, model),
    ):
        assert 0 < result.hit_blocks <= bound.pooled_min < bound.reuse
