"""The replay's ``engine_cache`` model: the cache as the sim's engines keep it, not as a router guesses."""

from __future__ import annotations

from infctl.router import Backend, RequestInfo
from infctl.router.replay import Fleet, FluidModel, TraceRequest
from infctl.telemetry.kv_events import BlockRemoved, BlockStored

BACKENDS = [Backend("e0"), Backend("e1")]


def model(engine_cache: bool) -> FluidModel:
    """8 blocks of 16 tokens per engine; 1000 prefill tokens/s; 10 ms per output token."""
    return FluidModel(prefill_tokens_per_s=1000, tpot_s=0.01, cache_tokens=128, engine_cache=engine_cache)


def item(at: float, i: int, blocks: range, output_tokens: int = 1) -> TraceRequest:
    req = RequestInfo(f"r{i}", prompt_tokens=16 * len(blocks), block_hashes=tuple(blocks))
    return TraceRequest(at, req, output_tokens)


def test_output_blocks_take_room_in_the_engine_cache() -> None:
    # A: 4 prompt blocks, no full output block. B: 2 prompt blocks, then 64 output tokens (4 blocks).
    # The engine then holds B's 6 blocks and only A's first 2; the router's guess keeps all of A's 4.
    held = {}
    for engine_cache in (False, True):
        fleet = Fleet(BACKENDS, model(engine_cache))
        fleet.dispatch(item(0.0, 0, range(0, 4)), "e0", "t")
        fleet.dispatch(item(1.0, 1, range(100, 102), output_tokens=64), "e0", "t")
        held[engine_cache] = fleet.cached(tuple(range(0, 4)), 10.0).get("e0", 0)
    assert held == {False: 4, True: 2}


def test_blocks_appear_when_the_prefill_ends_and_queued_prompts_count_on_their_own_engine() -> None:
    fleet = Fleet(BACKENDS, model(True))
    fleet.dispatch(item(0.0, 0, range(0, 4)), "e0", "t")  # 64 tokens: prefill ends at 0.064 s
    # Before then the blocks are in no cache, but a request queued behind it on e0 starts after it ends.
    assert fleet.cached(tuple(range(0, 4)), 0.01) == {"e0": 4}
    assert fleet.truth.match(tuple(range(0, 4))) == {}
    assert fleet.due_events(0.01) == []
    assert fleet.cached(tuple(range(0, 4)), 0.1) == {"e0": 4}
    assert fleet.truth.match(tuple(range(0, 4))) == {"e0": 4}
    [(backend, events)] = fleet.due_events(0.1)
    assert backend == "e0" and events == (BlockStored([0, 1, 2, 3], None, [], 16),)


def test_events_name_only_blocks_other_requests_can_share() -> None:
    # Output blocks are unique to their request: evicting them is not news to any router index.
    fleet = Fleet(BACKENDS, model(True))
    fleet.dispatch(item(0.0, 0, range(0, 2), output_tokens=96), "e1", "t")  # 2 + 6 blocks fill the cache
    fleet.dispatch(item(2.0, 1, range(50, 54)), "e1", "t")
    fleet.settle(10.0)
    published = [e for _, batch in fleet.due_events(10.0) for e in batch]
    stored = [h for e in published if isinstance(e, BlockStored) for h in e.block_hashes]
    removed = [h for e in published if isinstance(e, BlockRemoved) for h in e.block_hashes]
    assert stored == [0, 1, 50, 51, 52, 53]
    assert removed == []  # only A's output blocks made room (least recent: its tail)
    assert fleet.cached(tuple(range(0, 2)), 10.0) == {"e1": 2}


def test_without_engine_cache_the_replay_is_unchanged() -> None:
    fleet = Fleet(BACKENDS, model(False))
    fleet.dispatch(item(0.0, 0, range(0, 4)), "e0", "t")
    assert fleet.truth.match(tuple(range(0, 4))) == {"e0": 4}  # cached the moment it is routed
    [(_, events)] = fleet.due_events(0.064)
    assert events == (BlockStored([0, 1, 2, 3], None, [], 16),)


def test_best_rate_counts_what_the_best_stocked_engine_held() -> None:
    for engine_cache in (False, True):
        fleet = Fleet(BACKENDS, model(engine_cache))
        fleet.dispatch(item(0.0, 0, range(0, 4)), "e0", "t")
        fleet.dispatch(item(1.0, 1, range(0, 4)), "e1", "t")  # sent away from the engine holding it all
        fleet.dispatch(item(2.0, 2, range(0, 2)), "e1", "t")  # now both hold it: a hit
        r = fleet.result
        assert (r.hit_blocks, r.best_blocks, r.prompt_blocks) == (2, 6, 10)
        assert r.best_rate == 0.6 and r.hit_rate == 0.2
