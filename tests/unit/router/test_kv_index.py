"""The precise prefix index, built from KV events."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st
from test_prefix_index import brute_match

from infctl.router import KVIndex
from infctl.sim.types import BlockRemoved, BlockStored


@dataclass(frozen=True)
class AllBlocksCleared:
    """Stands in for the decoder's record: events are dispatched by their vLLM tag (the class name)."""


def stored(*hashes: int) -> BlockStored:
    return BlockStored(list(hashes), None, [], 16)


def test_events_build_and_shrink_the_index() -> None:
    idx = KVIndex()
    assert idx.apply("a", 0, [stored(1, 2, 3)]).applied
    idx.apply("b", 7, [stored(1, 2)])
    assert idx.match([1, 2, 3]) == {"a": 3, "b": 2}
    idx.apply("a", 1, [BlockRemoved([2])])
    assert idx.match([1, 2, 3]) == {"a": 1, "b": 2}
    idx.apply("b", 8, [AllBlocksCleared()])
    assert idx.match([1, 2, 3]) == {"a": 1}


def test_gaps_are_reported_and_stale_batches_ignored() -> None:
    idx = KVIndex()
    assert idx.apply("a", 5, [stored(1)]).missed == 0
    result = idx.apply("a", 9, [stored(2)])
    assert result.applied and result.missed == 3
    assert not idx.apply("a", 9, [stored(3)]).applied
    assert not idx.apply("a", 2, [stored(3)]).applied
    assert idx.blocks("a") == {1, 2}
    idx.clear("a")  # the caller's resync
    assert idx.blocks("a") == frozenset() and idx.last_seq("a") == 9


def test_unknown_events_are_refused() -> None:
    idx = KVIndex()
    try:
        idx.apply_event("a", object())
    except ValueError as err:
        assert "object" in str(err)
    else:
        raise AssertionError("expected ValueError")


event = st.one_of(
    st.lists(st.integers(0, 20), max_size=6).map(lambda hs: stored(*hs)),
    st.lists(st.integers(0, 20), max_size=6).map(lambda hs: BlockRemoved(hs)),
    st.just(AllBlocksCleared()),
)
streams = st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.lists(event, max_size=4)), max_size=30)


@settings(max_examples=300, deadline=None)
@given(stream=streams, probe=st.lists(st.integers(0, 20), max_size=10))
def test_index_equals_a_brute_force_set_model(
    stream: list[tuple[str, list[object]]], probe: list[int]
) -> None:
    idx = KVIndex()
    model: dict[str, set[int]] = {"a": set(), "b": set(), "c": set()}
    seq = {"a": 0, "b": 0, "c": 0}
    for backend, events in stream:
        seq[backend] += 1
        idx.apply(backend, seq[backend], events)
        for ev in events:
            if isinstance(ev, BlockStored):
                model[backend] |= set(ev.block_hashes)
            elif isinstance(ev, BlockRemoved):
                model[backend] -= set(ev.block_hashes)
            else:
                model[backend].clear()
    for name, held in model.items():
        assert idx.blocks(name) == held
    assert idx.match(probe) == brute_match(model, probe)


@settings(max_examples=100, deadline=None)
@given(stream=streams, probe=st.lists(st.integers(0, 20), max_size=10))
def test_two_replicas_fed_the_same_events_agree(
    stream: list[tuple[str, list[object]]], probe: list[int]
) -> None:
    one, two = KVIndex(), KVIndex()
    for i, (backend, events) in enumerate(stream):
        one.apply(backend, i, events)
        two.apply(backend, i, events)
    assert one.match(probe) == two.match(probe)


def test_a_speculative_entry_is_seen_until_its_deadline_or_an_event() -> None:
    idx = KVIndex()
    idx.speculate("a", [1, 2, 3], deadline=2.0)
    assert idx.match([1, 2, 3]) == {"a": 3}
    idx.apply("a", 0, [stored(1, 2)])  # the engine confirms the first two blocks
    assert idx.blocks("a") == {1, 2} and idx.speculative("a") == {3}
    idx.expire(1.9)
    assert idx.match([1, 2, 3]) == {"a": 3}
    idx.expire(2.0)  # block 3 was never confirmed: gone; the confirmed ones stay
    assert idx.match([1, 2, 3]) == {"a": 2}
    idx.speculate("b", [1, 2], deadline=5.0)
    idx.apply("b", 0, [BlockRemoved([2])])  # evicted before the deadline: gone at once
    assert idx.match([1, 2]) == {"a": 2, "b": 1}
    idx.forget("b")
    assert idx.match([1, 2]) == {"a": 2}


actions = st.lists(
    st.one_of(
        st.tuples(st.just("event"), st.sampled_from(["a", "b"]), event),
        st.tuples(
            st.just("speculate"), st.sampled_from(["a", "b"]), st.lists(st.integers(0, 12), max_size=5)
        ),
        st.tuples(st.just("tick"), st.just(""), st.floats(0.0, 1.5)),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(script=actions, ttl=st.floats(0.1, 2.0), probe=st.lists(st.integers(0, 12), max_size=8))
def test_speculation_equals_a_brute_force_model(
    script: list[tuple[str, str, object]], ttl: float, probe: list[int]
) -> None:
    """Confirmed blocks plus unexpired speculative ones, whatever the interleaving of events and routes."""
    idx = KVIndex()
    held: dict[str, set[int]] = {"a": set(), "b": set()}
    spec: dict[str, dict[int, float]] = {"a": {}, "b": {}}
    now, seq = 0.0, 0
    for kind, backend, what in script:
        if kind == "tick":
            assert isinstance(what, float)
            now += what
            continue
        if kind == "speculate":
            assert isinstance(what, list)
            idx.speculate(backend, what, now + ttl)
            spec[backend].update({h: now + ttl for h in what if h not in held[backend]})
            continue
        seq += 1
        idx.apply(backend, seq, [what])
        if isinstance(what, BlockStored | BlockRemoved):
            for h in what.block_hashes:
                spec[backend].pop(h, None)
                (held[backend].add if isinstance(what, BlockStored) else held[backend].discard)(h)
        else:
            held[backend].clear()
            spec[backend].clear()
    idx.expire(now)
    visible = {b: held[b] | {h for h, d in spec[b].items() if d > now} for b in held}
    assert idx.match(probe) == brute_match(visible, probe)
    for b in held:
        assert idx.blocks(b) == held[b]


def test_offload_tier_events_leave_the_gpu_index_alone() -> None:
    def stored(medium: str) -> BlockStored:
        return BlockStored(block_hashes=[1, 2, 3], parent_block_hash=None, token_ids=[], block_size=16,
                           medium=medium)  # fmt: skip

    index = KVIndex()
    index.apply("a", 1, [stored("GPU"), stored("CPU")])
    index.apply("a", 2, [BlockRemoved(block_hashes=[1, 2], medium="CPU")])  # the tier evicted its copies
    assert index.blocks("a") == {1, 2, 3}
    index.apply("a", 3, [BlockRemoved(block_hashes=[3])])  # the GPU's own eviction still counts
    assert index.blocks("a") == {1, 2}
