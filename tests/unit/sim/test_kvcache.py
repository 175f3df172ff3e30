from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from infctl.sim.kvcache import BlockPool, chain_hash, output_token_id, root_hash
from infctl.sim.types import BlockRemoved, BlockStored
from infctl.tokens import block_hashes, output_word, token_ids


def test_incremental_hashes_agree_with_the_token_convention() -> None:
    ids = list(range(1000, 1000 + 70))
    want = block_hashes(ids, 16, "model-x")
    parent = root_hash("model-x")
    got = []
    for b in range(len(ids) // 16):
        parent = chain_hash(parent, ids[b * 16 : (b + 1) * 16])
        got.append(parent)
    assert got == want


def test_output_token_ids_follow_the_token_convention() -> None:
    for seed in (0, 7):
        for i in range(50):
            assert output_token_id(seed, i) == token_ids(output_word(seed, i))[0]


def test_allocate_and_free_keep_counts() -> None:
    pool = BlockPool(8)
    a = pool.allocate(3)
    b = pool.allocate(5)
    assert sorted(a + b) == list(range(8))
    assert pool.used == 8 and pool.num_free == 0
    pool.free(a)
    assert pool.used == 5 and pool.num_free == 3


def test_free_queue_is_lru_and_a_freed_sequence_goes_tail_first() -> None:
    pool = BlockPool(6, record_events=True)
    a = pool.allocate(3)
    for i, blk in enumerate(a):
        assert pool.cache(blk, 100 + i)
    b = pool.allocate(3)
    for i, blk in enumerate(b):
        assert pool.cache(blk, 200 + i)
    pool.free(a)
    pool.free(b)
    # a's last block is evicted first, then its earlier ones, then b's (freed later).
    assert pool.free_queue() == [*reversed(a), *reversed(b)]
    pool.allocate(4)
    assert pool.drain_events() == [BlockRemoved(block_hashes=[102, 101, 100, 202])]
    assert pool.lookup([100], 1) == [] and pool.lookup([200, 201], 2) == [b[0], b[1]]


def test_touch_takes_cached_blocks_out_of_the_free_queue() -> None:
    pool = BlockPool(4)
    (blk,) = pool.allocate(1)
    pool.cache(blk, 42)
    pool.free([blk])
    assert pool.used == 0 and pool.num_free == 4
    hits = pool.lookup([42, 43], 2)
    assert hits == [blk] and pool.count_unreferenced(hits) == 1
    pool.touch(hits)
    pool.touch(hits)
    assert pool.ref[blk] == 2 and pool.used == 1 and blk not in pool.free_queue()
    pool.free(hits)
    pool.free(hits)
    assert pool.free_queue()[-1] == blk and pool.lookup([42], 1) == [blk]


def test_a_hash_is_cached_once() -> None:
    pool = BlockPool(4)
    x, y = pool.allocate(2)
    assert pool.cache(x, 7)
    assert not pool.cache(y, 7)
    pool.free([y])
    assert pool.lookup([7], 1) == [x]


def test_reset_cache_is_refused_while_blocks_are_used() -> None:
    pool = BlockPool(4, record_events=True)
    (x,) = pool.allocate(1)
    pool.cache(x, 9)
    assert not pool.reset_cache()
    pool.free([x])
    assert pool.reset_cache()
    assert pool.lookup([9], 1) == []
    assert pool.drain_events() == [BlockRemoved(block_hashes=[9])]


def test_record_stored_only_when_enabled() -> None:
    quiet = BlockPool(2)
    quiet.record_stored([1], None, [5, 6], 2)
    assert quiet.drain_events() == []
    loud = BlockPool(2, record_events=True)
    loud.record_stored([1], None, [5, 6], 2)
    assert loud.drain_events() == [BlockStored([1], None, [5, 6], 2)]


ops = st.lists(
    st.one_of(
        st.tuples(st.just("alloc"), st.integers(1, 4)),
        st.tuples(st.just("free"), st.integers(0, 50)),
        st.tuples(st.just("hit"), st.integers(0, 50)),
    ),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(ops)
def test_random_operations_keep_the_pool_consistent(sequence: list[tuple[str, int]]) -> None:
    total = 12
    pool = BlockPool(total)
    held: list[list[int]] = []  # each entry: one holder's blocks
    next_hash = 0
    for op, arg in sequence:
        if op == "alloc" and arg <= pool.num_free:
            blocks = pool.allocate(arg)
            for blk in blocks:
                next_hash += 1
                pool.cache(blk, next_hash)
            held.append(blocks)
        elif op == "free" and held:
            pool.free(held.pop(arg % len(held)))
        elif op == "hit" and next_hash:
            hits = pool.lookup([arg % next_hash + 1], 1)
            pool.touch(hits)
            if hits:
                held.append(hits)
        refs = [0] * total
        for blocks in held:
            for blk in blocks:
                refs[blk] += 1
        assert pool.ref == refs
        free = pool.free_queue()
        assert len(set(free)) == len(free)
        assert set(free) == {b for b in range(total) if refs[b] == 0}
        assert pool.used + pool.num_free == total
        assert all(pool.block_hash[b] == h for h, b in pool.by_hash.items())
