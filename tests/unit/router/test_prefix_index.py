"""The approximate (learned, LRU) prefix index."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from infctl.router import ApproxPrefixIndex, capacity_entries
from infctl.tokens import block_hashes


def brute_match(blocks: dict[str, set[int]], hashes: list[int]) -> dict[str, int]:
    out: dict[str, int] = {}
    for name, held in blocks.items():
        n = 0
        while n < len(hashes) and hashes[n] in held:
            n += 1
        if n:
            out[name] = n
    return out


def test_match_is_the_longest_chained_prefix_per_backend() -> None:
    idx = ApproxPrefixIndex()
    idx.record("a", [1, 2, 3, 4])
    idx.record("b", [1, 2, 9])
    assert idx.match([1, 2, 3, 4, 5]) == {"a": 4, "b": 2}
    assert idx.match([2, 3]) == {"a": 2, "b": 1}
    assert idx.match([7]) == {}
    assert idx.match([]) == {}


def test_eviction_trims_chains_from_the_tail_so_the_root_survives() -> None:
    idx = ApproxPrefixIndex()
    idx.record("a", [1, 2, 3, 4, 5, 6], capacity=4)
    assert idx.blocks("a") == {1, 2, 3, 4}
    assert idx.match([1, 2, 3, 4, 5, 6]) == {"a": 4}


def test_touching_a_prefix_again_keeps_it_over_newer_unrelated_blocks() -> None:
    idx = ApproxPrefixIndex()
    idx.record("a", [1, 2], capacity=4)
    idx.record("a", [10, 11])
    idx.record("a", [1, 2])  # the shared system prompt is used again
    idx.record("a", [20, 21])
    assert idx.blocks("a") == {1, 2, 20, 21}


def test_capacity_comes_from_the_engine_cache_size_or_the_default() -> None:
    assert capacity_entries(160_000, 16) == 10_000
    assert capacity_entries(None, 16) == 31_250
    assert capacity_entries(0, 16, default=7) == 7


def test_forget_drops_a_backend_and_frees_its_slot() -> None:
    idx = ApproxPrefixIndex()
    idx.record("a", [1, 2])
    idx.record("b", [1])
    idx.forget("a")
    assert idx.match([1, 2]) == {"b": 1}
    idx.record("c", [1, 2])
    assert idx.match([1, 2]) == {"b": 1, "c": 2}


def test_real_chained_hashes_share_exactly_the_common_prefix() -> None:
    system = list(range(64))
    a = block_hashes([*system, *range(100, 132)], 16, "m")
    b = block_hashes([*system, *range(200, 232)], 16, "m")
    idx = ApproxPrefixIndex()
    idx.record("x", a)
    assert idx.match(b) == {"x": 4}


records = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "c"]),
        st.lists(st.integers(0, 30), max_size=12),
        st.one_of(st.none(), st.integers(1, 10)),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(ops=records, probe=st.lists(st.integers(0, 30), max_size=12))
def test_capacity_is_never_exceeded_and_match_agrees_with_a_brute_force_model(
    ops: list[tuple[str, list[int], int | None]], probe: list[int]
) -> None:
    idx = ApproxPrefixIndex(default_capacity=6)
    for backend, hashes, cap in ops:
        idx.record(backend, hashes, cap)
        assert idx.size(backend) <= idx.capacity(backend)
    model = {name: set(idx.blocks(name)) for name in "abc" if idx.blocks(name)}
    assert idx.match(probe) == brute_match(model, probe)


@settings(max_examples=100, deadline=None)
@given(ops=records, probe=st.lists(st.integers(0, 30), max_size=12))
def test_two_indexes_fed_the_same_decisions_agree(
    ops: list[tuple[str, list[int], int | None]], probe: list[int]
) -> None:
    one, two = ApproxPrefixIndex(6), ApproxPrefixIndex(6)
    for backend, hashes, cap in ops:
        one.record(backend, hashes, cap)
        two.record(backend, hashes, cap)
    assert one.match(probe) == two.match(probe)


def test_record_reports_what_it_added_and_evicted() -> None:
    idx = ApproxPrefixIndex()
    first = idx.record("a", [1, 2, 3], capacity=4)
    assert sorted(first.added) == [1, 2, 3] and first.evicted == ()
    again = idx.record("a", [1, 2, 5, 6])  # 5 and 6 are new; the oldest entry (leaf 3) makes room
    assert sorted(again.added) == [5, 6] and again.evicted == (3,)
    assert idx.record("a", [], capacity=2).evicted == (6, 5)
