"""Which backends hold which block: the structure both prefix indexes share.

Each backend gets a bit; each block hash maps to the bitmask of backends holding it. Matching a request walks
its chained hashes once, AND-ing masks, so the cost is one integer operation per block whatever the number of
backends (128 backends x 512 blocks stays in the tens of microseconds).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from itertools import accumulate, compress, repeat, takewhile
from operator import and_, ne, not_, or_


class OwnerMap:
    """block hash -> bitmask of backend slots. Deterministic: no iteration order depends on ``hash()``."""

    __slots__ = ("_free", "_masks", "_names", "_slots")

    def __init__(self) -> None:
        self._masks: dict[int, int] = {}
        self._slots: dict[str, int] = {}
        self._names: list[str | None] = []
        self._free: list[int] = []

    def bit(self, backend: str) -> int:
        """The backend's bit, allocating the lowest free slot on first use."""
        slot = self._slots.get(backend)
        if slot is None:
            if self._free:
                self._free.sort()
                slot = self._free.pop(0)
                self._names[slot] = backend
            else:
                slot = len(self._names)
                self._names.append(backend)
            self._slots[backend] = slot
        return 1 << slot

    def release(self, backend: str) -> None:
        """Forget a backend whose blocks were all discarded."""
        slot = self._slots.pop(backend, None)
        if slot is not None:
            self._names[slot] = None
            self._free.append(slot)

    def add(self, block: int, bit: int) -> None:
        self._masks[block] = self._masks.get(block, 0) | bit

    def discard(self, block: int, bit: int) -> None:
        mask = self._masks.get(block, 0) & ~bit
        if mask:
            self._masks[block] = mask
        else:
            self._masks.pop(block, None)

    def add_many(self, blocks: Iterable[int], bit: int) -> None:
        masks = self._masks
        blocks = list(blocks)
        masks.update(zip(blocks, map(or_, map(masks.get, blocks, repeat(0)), repeat(bit)), strict=True))

    def discard_many(self, blocks: Sequence[int], bit: int) -> None:
        """``discard`` for each block, the per-block work in C."""
        masks, keep = self._masks, ~bit
        left = list(map(and_, map(masks.get, blocks, repeat(0)), repeat(keep)))
        masks.update(zip(blocks, left, strict=True))
        deque(map(masks.pop, compress(blocks, map(not_, left))), maxlen=0)

    def match(self, hashes: Sequence[int]) -> dict[str, int]:
        """Backend -> number of leading blocks of ``hashes`` it holds (stops at its first miss); no zeros."""
        if not hashes:
            return {}
        # Running AND of the owner masks: acc[i] = backends holding blocks 0..i. A backend's match ends where
        # its bit leaves acc; only the (few) positions where acc changes need Python-level work, the per-block
        # scan runs in C (map / accumulate / compress).
        # takewhile stops at the first block nobody holds: a long prompt's unshared tail costs nothing.
        acc = list(takewhile(bool, accumulate(map(self._masks.get, hashes, repeat(0)), and_)))
        out: dict[str, int] = {}
        if not acc:
            return out
        for i in compress(range(1, len(acc)), map(ne, acc, acc[1:])):
            for name in self._names_of(acc[i - 1] & ~acc[i]):
                out[name] = i
        for name in self._names_of(acc[-1]):
            out[name] = len(acc)
        return out

    def _names_of(self, mask: int) -> Iterator[str]:
        while mask:
            low = mask & -mask
            name = self._names[low.bit_length() - 1]
            if name is not None:
                yield name
            mask ^= low
