"""The KV block pool: fixed-size blocks, reference counts, a prefix cache keyed by chained block hashes.

Modelled on vLLM v1's ``BlockPool``: every block with no user sits in one LRU free queue, whether or not
it still holds a cached prefix. Allocation takes blocks from the queue's head and evicts any cached hash
they held (a ``BlockRemoved`` event); freeing appends a request's blocks tail-first, so a prefix's last
blocks are evicted before its first ones. A hash maps to at most one block: when two requests compute
the same block concurrently, the second copy stays uncached (vLLM keeps both; one copy is enough for
the hit rate and keeps the event stream one-store-one-remove per hash).
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from collections import OrderedDict
from collections.abc import Sequence
from functools import cache

from infctl.sim.types import BlockRemoved, BlockStored, KVEvent
from infctl.tokens import block_hashes, output_word


class BlockPool:
    """``num_blocks`` blocks; ``used`` of them referenced by requests, the rest in the LRU free queue."""

    __slots__ = (
        "_free",
        "block_hash",
        "by_hash",
        "events",
        "evicted",
        "num_blocks",
        "record_events",
        "ref",
        "used",
    )

    def __init__(self, num_blocks: int, *, record_events: bool = False) -> None:
        self.num_blocks = num_blocks
        self.ref = [0] * num_blocks
        """Requests holding each block."""
        self.block_hash: list[int | None] = [None] * num_blocks
        """The cached hash each block holds, if any."""
        self.by_hash: dict[int, int] = {}
        """Cached hash -> block."""
        self._free: OrderedDict[int, None] = OrderedDict.fromkeys(range(num_blocks))
        self.used = 0
        self.record_events = record_events
        self.events: list[KVEvent] = []
        """Cache changes since the last ``drain_events`` (only when ``record_events``)."""
        self.evicted: list[int] | None = None
        """When a list: every hash ``allocate`` evicts is appended to it (an offload tier's write-back)."""

    @property
    def num_free(self) -> int:
        """Blocks allocatable now, cached-but-unreferenced ones included."""
        return len(self._free)

    def free_queue(self) -> list[int]:
        """The free queue, next to be allocated first (for tests and inspection)."""
        return list(self._free)

    def lookup(self, hashes: Sequence[int], limit: int) -> list[int]:
        """Blocks holding the longest cached prefix of ``hashes``, at most ``limit`` of them."""
        get = self.by_hash.get
        found: list[int] = []
        for i in range(min(limit, len(hashes))):
            block = get(hashes[i])
            if block is None:
                break
            found.append(block)
        return found

    def count_unreferenced(self, blocks: Sequence[int]) -> int:
        """How many of ``blocks`` sit in the free queue (touching them takes them out of it)."""
        ref = self.ref
        return sum(1 for b in blocks if ref[b] == 0)

    def touch(self, blocks: Sequence[int]) -> None:
        """Take a reference on cache-hit blocks."""
        ref, free = self.ref, self._free
        for b in blocks:
            if ref[b] == 0:
                del free[b]
                self.used += 1
            ref[b] += 1

    def allocate(self, n: int) -> list[int]:
        """``n`` fresh blocks from the free queue's head, evicting the hashes they held."""
        if n > len(self._free):
            raise RuntimeError(f"allocate({n}) with only {len(self._free)} free blocks")
        free, ref, block_hash = self._free, self.ref, self.block_hash
        blocks: list[int] = []
        evicted: list[int] = []
        for _ in range(n):
            b = free.popitem(last=False)[0]
            h = block_hash[b]
            if h is not None:
                block_hash[b] = None
                del self.by_hash[h]
                evicted.append(h)
            ref[b] = 1
            blocks.append(b)
        self.used += n
        if evicted:
            if self.record_events:
                self.events.append(BlockRemoved(block_hashes=evicted))
            if self.evicted is not None:
                self.evicted.extend(evicted)
        return blocks

    def free(self, blocks: Sequence[int]) -> None:
        """Drop a request's references; blocks nobody holds join the queue's tail, last block first."""
        ref, free = self.ref, self._free
        for b in reversed(blocks):
            ref[b] -= 1
            if ref[b] == 0:
                free[b] = None
                self.used -= 1

    def cache(self, block: int, block_hash: int) -> bool:
        """Register a computed full block under its hash; False if another block already holds it."""
        if block_hash in self.by_hash:
            return False
        self.by_hash[block_hash] = block
        self.block_hash[block] = block_hash
        return True

    def record_stored(
        self, hashes: list[int], parent: int | None, token_ids: list[int], block_size: int
    ) -> None:
        if self.record_events:
            self.events.append(BlockStored(hashes, parent, token_ids, block_size))

    def reset_cache(self) -> bool:
        """Forget every cached hash; only when no block is in use (as vLLM's ``reset_prefix_cache``)."""
        if self.used:
            return False
        if self.by_hash and self.record_events:
            self.events.append(BlockRemoved(block_hashes=list(self.by_hash)))
        self.by_hash.clear()
        self.block_hash = [None] * self.num_blocks
        return True

    def drain_events(self) -> list[KVEvent]:
        events, self.events = self.events, []
        return events


# Chained block hashes, extended one block at a time as a request generates tokens. This must agree with
# ``infctl.tokens.block_hashes`` (the convention); tests/unit/sim/test_kvcache.py checks that it does.
_PACKERS: dict[int, struct.Struct] = {}


def root_hash(seed: str) -> int:
    """The parent of a sequence's first block."""
    return int.from_bytes(hashlib.blake2b(seed.encode(), digest_size=8).digest(), "little")


def chain_hash(parent: int, block_ids: Sequence[int]) -> int:
    """Hash of one full block given its parent's hash."""
    packer = _PACKERS.get(len(block_ids))
    if packer is None:
        packer = _PACKERS.setdefault(len(block_ids), struct.Struct(f"<Q{len(block_ids)}I"))
    return int.from_bytes(hashlib.blake2b(packer.pack(parent, *block_ids), digest_size=8).digest(), "little")


@cache
def _word_id(word: str) -> int:
    return zlib.crc32(word.encode())


def output_token_id(seed: int, index: int) -> int:
    """Id of a request's ``index``-th (0-based) generated token, as ``infctl.tokens`` renders it."""
    return _word_id(output_word(seed, index))


class SequenceHashes:
    """Chained hashes of one sequence's full blocks: its prompt, then its generated tokens as they come.

    Computed once per request (the prompt's at first admission) and extended a block at a time.
    """

    __slots__ = ("block_size", "hashes", "out_seed", "prompt", "root")

    def __init__(self, prompt: list[int], out_seed: int, block_size: int, seed: str) -> None:
        self.prompt = prompt
        self.out_seed = out_seed
        self.block_size = block_size
        self.root = root_hash(seed)
        self.hashes = block_hashes(prompt, block_size, seed)

    def upto(self, n_blocks: int) -> list[int]:
        """At least ``n_blocks`` hashes (the caller knows that many blocks are full)."""
        hashes = self.hashes
        while len(hashes) < n_blocks:
            parent = hashes[-1] if hashes else self.root
            hashes.append(chain_hash(parent, self.block_ids(len(hashes))))
        return hashes

    def block_ids(self, i: int) -> list[int]:
        """Token ids of block ``i``: prompt tokens, then generated ones."""
        bs, n_prompt = self.block_size, len(self.prompt)
        ids = self.prompt[i * bs : (i + 1) * bs]
        for pos in range(max(i * bs, n_prompt), (i + 1) * bs):
            ids.append(output_token_id(self.out_seed, pos - n_prompt))
        return ids
