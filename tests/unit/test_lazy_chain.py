"""LazyChain: block_hashes' values, hashed only as far as they are read."""

from __future__ import annotations

import random

import pytest

from infctl.lazy_chain import LazyChain
from infctl.router import Backend, RequestInfo, RouterCore, Snapshot, build_policy
from infctl.router.prefix_index import ApproxPrefixIndex
from infctl.tokens import MEMO_BLOCKS, block_hashes


@pytest.mark.parametrize("n", [0, 15, 16, 17, 16 * MEMO_BLOCKS, 16 * MEMO_BLOCKS + 5, 7137])
@pytest.mark.parametrize("block", [1, 16, 128])
def test_the_same_values_as_block_hashes(n: int, block: int) -> None:
    ids = [random.Random(n).getrandbits(32) for _ in range(n)]
    want = block_hashes(ids, block, "seed")
    chain = LazyChain(ids, block, "seed")
    assert len(chain) == len(want)
    assert chain == want and list(chain) == want and chain[::-1] == want[::-1]
    if want:
        assert (chain[0], chain[-1], chain[len(want) // 2]) == (want[0], want[-1], want[len(want) // 2])
    with pytest.raises(IndexError):
        chain[len(want)]


def test_a_prompt_sharing_nothing_is_matched_on_one_run_of_blocks() -> None:
    index = ApproxPrefixIndex()
    index.record("e0", block_hashes(list(range(4096)), 16))
    ids = [random.Random(1).getrandbits(32) for _ in range(16 * 400)]
    chain = LazyChain(ids, 16)
    assert index.match(chain) == {}
    assert chain.hashed == MEMO_BLOCKS  # of 400
    assert chain[:5] == block_hashes(ids[:80], 16) and chain.hashed == MEMO_BLOCKS
    shared = LazyChain(list(range(4096)) + ids, 16)
    assert index.match(shared) == {"e0": 256}
    assert shared.hashed == 256 + MEMO_BLOCKS  # the shared prefix, then one run past it


def test_learning_the_first_blocks_records_only_those() -> None:
    core = RouterCore(build_policy("cache_aware"))
    backends = (Backend("e0"), Backend("e1"))
    snap = Snapshot(backends, {}, now=0.0)
    req = RequestInfo.from_ids("r", list(range(16 * 100)), block_size=16)
    core.learn(snap, req, "e0", first=MEMO_BLOCKS)
    assert core.approx.size("e0") == MEMO_BLOCKS
    assert core.matches(req) == {"e0": MEMO_BLOCKS}  # already enough to steer the prefix to e0
    core.learn(snap, req, "e0")
    assert core.matches(req) == {"e0": 100}


def test_the_estimates_array_hashes_as_its_list() -> None:
    from infctl.tokenization import EstimateTokenizer

    text = "The estimate's ids, 4 ASCII bytes each; 中文 one a character. " * 40
    tok = EstimateTokenizer()
    assert tok.ids(text).tolist() == tok.encode(text)
    assert LazyChain(tok.ids(text), 16) == block_hashes(tok.encode(text), 16)
