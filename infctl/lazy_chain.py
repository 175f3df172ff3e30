"""``block_hashes`` computed as they are read, so a prompt's unshared tail costs nothing on the router's path.

A router matches a prompt's chained block hashes against its index from the first block and stops at the
first block no backend holds: for a prompt sharing nothing that is one block, whatever its length. A
``LazyChain`` is a sequence of those hashes that hashes a run of ``MEMO_BLOCKS`` blocks at a time when a
reader reaches it (with ``block_hashes``'s memo), so the match pays for the shared prefix and the rest is
hashed later, when the index learns the request (off the request's critical path).
"""

from __future__ import annotations

import struct
import sys
from array import array
from collections.abc import Iterator, Sequence
from typing import overload

from infctl.tokens import MEMO_BLOCKS, chain_run, root_digest

_LITTLE = sys.byteorder == "little"


class LazyChain(Sequence[int]):
    """The values of ``block_hashes(ids, block_size, seed)``, computed on first read."""

    __slots__ = ("_block", "_done", "_ids", "_n", "_parent")

    def __init__(self, ids: Sequence[int], block_size: int, seed: str = "") -> None:
        self._ids = ids
        self._block = block_size
        self._n = len(ids) // block_size
        self._done: list[int] = []
        self._parent = root_digest(seed)

    def __len__(self) -> int:
        return self._n

    @property
    def hashed(self) -> int:
        """Blocks hashed so far."""
        return len(self._done)

    def _upto(self, count: int) -> None:
        """Hash runs until at least ``count`` blocks (at most all) are known."""
        done, block = self._done, self._block
        while len(done) < min(count, self._n):
            first = len(done)
            last = min(self._n, first + MEMO_BLOCKS)
            ids = self._ids[first * block : last * block]
            if isinstance(ids, array) and ids.itemsize == 4 and _LITTLE:
                buf = ids.tobytes()  # the estimate's ids: already the packed form
            else:
                buf = struct.pack(f"<{len(ids)}I", *ids)
            hashes, self._parent = chain_run(self._parent, buf, block, memo=last - first == MEMO_BLOCKS)
            done.extend(hashes)

    def __iter__(self) -> Iterator[int]:
        i = 0
        while i < self._n:
            if i >= len(self._done):
                self._upto(i + 1)
            yield self._done[i]
            i += 1

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[int]: ...

    def __getitem__(self, index: int | slice) -> int | Sequence[int]:
        if isinstance(index, slice):
            start, stop, step = index.indices(self._n)
            self._upto(stop if step > 0 else start + 1)  # a leading slice hashes only its blocks
            return self._done[index]
        if index < 0:
            index += self._n
        if not 0 <= index < self._n:
            raise IndexError("block index out of range")
        self._upto(index + 1)
        return self._done[index]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(other) == self._n and list(self) == list(other)

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"LazyChain({len(self._done)} of {self._n} blocks hashed)"
