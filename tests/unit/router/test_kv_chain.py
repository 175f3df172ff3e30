"""The precise index re-hashes engines' KV events into the router's blocks: a prompt the router hashed
matches what an engine reports, whatever hash function and block size the engine uses."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from infctl.router.kv_index import KVIndex
from infctl.router.snapshot import RequestInfo
from infctl.telemetry.kv_events import AllBlocksCleared, BlockRemoved, BlockStored


def engine_events(ids: list[int], engine_block: int, rng: random.Random) -> tuple[list[int], BlockStored]:
    """One BlockStored for the full engine blocks of ``ids``, under hashes the router cannot reproduce
    (vLLM's are SHA-256 or seeded per process)."""
    n = len(ids) // engine_block
    hashes = [rng.getrandbits(64) for _ in range(n)]
    return hashes, BlockStored(hashes, None, ids[: n * engine_block], engine_block)


def request(ids: list[int], block_size: int = 16) -> RequestInfo:
    return RequestInfo.from_ids("r", ids, block_size=block_size, model="m")


def test_a_vllm_cpu_block_of_128_tokens_is_8_router_blocks_of_16() -> None:
    rng = random.Random(1)
    ids = [rng.randrange(32_000) for _ in range(300)]
    idx = KVIndex(block_size=16)
    hashes, stored = engine_events(ids, 128, rng)
    idx.apply("e0", 0, [stored])
    assert idx.match(request(ids).block_hashes) == {"e0": 16}  # two engine blocks; the rest is uncached
    idx.apply("e0", 1, [BlockRemoved([hashes[1]])])
    assert idx.match(request(ids).block_hashes) == {"e0": 8}
    idx.apply("e0", 2, [AllBlocksCleared()])
    assert idx.match(request(ids).block_hashes) == {}


def test_a_child_event_continues_its_parents_chain_and_an_unknown_parent_is_not_indexed() -> None:
    rng = random.Random(2)
    ids = [rng.randrange(1000) for _ in range(64)]
    idx = KVIndex(block_size=16)
    first = BlockStored([11], None, ids[:32], 32)
    second = BlockStored([12], 11, ids[32:64], 32)
    orphan = BlockStored([99], 98, ids[:32], 32)
    idx.apply("e0", 0, [first, second])
    idx.apply("e1", 0, [orphan])
    assert idx.match(request(ids).block_hashes) == {"e0": 4}


def test_engine_blocks_smaller_than_the_routers_are_joined() -> None:
    ids = list(range(100, 164))
    idx = KVIndex(block_size=16)
    idx.apply("e0", 0, [BlockStored([1, 2, 3], None, ids[:12], 4)])  # 12 tokens: no router block yet
    assert idx.match(request(ids).block_hashes) == {}
    idx.apply("e0", 1, [BlockStored([4, 5], 3, ids[12:20], 4)])  # 20 tokens: one router block
    assert idx.match(request(ids).block_hashes) == {"e0": 1}


def test_a_different_prompt_or_model_seed_does_not_match() -> None:
    rng = random.Random(3)
    ids = [rng.randrange(32_000) for _ in range(128)]
    idx = KVIndex(block_size=16)
    idx.apply("e0", 0, [engine_events(ids, 16, rng)[1]])
    other = [*ids[:40], *(i + 1 for i in ids[40:])]
    assert idx.match(request(other).block_hashes) == {"e0": 2}  # the shared 40 tokens: 2 full blocks


@settings(max_examples=60, deadline=None)
@given(
    n_tokens=st.integers(0, 600),
    engine_block=st.sampled_from([1, 4, 16, 32, 128]),
    router_block=st.sampled_from([4, 16, 64]),
    seed=st.integers(0, 10_000),
)
def test_any_block_sizes_match_every_full_router_block_the_engine_holds(
    n_tokens: int, engine_block: int, router_block: int, seed: int
) -> None:
    rng = random.Random(seed)
    ids = [rng.randrange(50_000) for _ in range(n_tokens)]
    idx = KVIndex(block_size=router_block)
    # The engine stores its blocks over several events, each naming its parent.
    n_blocks = n_tokens // engine_block
    hashes = [rng.getrandbits(64) for _ in range(n_blocks)]
    events: list[object] = []
    i = 0
    while i < n_blocks:
        k = rng.randint(1, 4)
        chunk = hashes[i : i + k]
        parent = hashes[i - 1] if i else None
        events.append(
            BlockStored(chunk, parent, ids[i * engine_block : (i + len(chunk)) * engine_block], engine_block)
        )
        i += len(chunk)
    idx.apply("e0", 0, events)
    held = (n_blocks * engine_block) // router_block
    assert idx.match(request(ids, router_block).block_hashes).get("e0", 0) == held
