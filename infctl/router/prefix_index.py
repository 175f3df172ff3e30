"""The approximate prefix index: what each backend probably caches, learned from the router's own decisions.

After a request goes to backend B, B is assumed to hold the request's blocks. Each backend keeps an LRU of
block hashes capped at what its engine can cache, so old prefixes age out roughly as they do on the engine.
Every operation is O(1) per block. Two routers that see the same decisions in the same order hold the same
index.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import filterfalse, islice

from infctl.router._owners import OwnerMap

DEFAULT_ENTRIES = 31_250
"""Entries per backend when its cache size is unknown (llm-d's default)."""


@dataclass(frozen=True, slots=True)
class Change:
    """What one ``record`` did to a backend's set."""

    added: tuple[int, ...] = ()
    """Hashes the backend did not hold before (leaf first)."""
    evicted: tuple[int, ...] = ()
    """Hashes dropped to stay within capacity (oldest first)."""


def capacity_entries(
    cache_capacity_tokens: int | None, block_size: int, default: int = DEFAULT_ENTRIES
) -> int:
    """Blocks a backend can hold: the engine's cache size over the index block size, else ``default``."""
    if cache_capacity_tokens and block_size > 0:
        return max(1, cache_capacity_tokens // block_size)
    return default


class ApproxPrefixIndex:
    """Per-backend LRU sets of chained block hashes."""

    __slots__ = ("_capacity", "_default", "_lru", "_owners")

    def __init__(self, default_capacity: int = DEFAULT_ENTRIES) -> None:
        self._owners = OwnerMap()
        self._lru: dict[str, OrderedDict[int, None]] = {}
        self._capacity: dict[str, int] = {}
        self._default = default_capacity

    def capacity(self, backend: str) -> int:
        return self._capacity.get(backend, self._default)

    def set_capacity(self, backend: str, entries: int) -> None:
        """Resize a backend's LRU (e.g. when its engine first reports its cache size), evicting the oldest."""
        self._resize(backend, entries)

    def _resize(self, backend: str, entries: int) -> list[int]:
        self._capacity[backend] = max(1, entries)
        lru = self._lru.get(backend)
        return self._evict(backend, lru) if lru is not None else []

    def record(self, backend: str, hashes: Sequence[int], capacity: int | None = None) -> Change:
        """Note that ``backend`` now holds the chained blocks ``hashes`` (most recently used).

        Returns what changed, so a model that uses this index as an engine's true cache (the replay) can
        publish the KV events the engine would.
        """
        evicted: list[int] = []
        if capacity is not None and capacity != self._capacity.get(backend):
            evicted = self._resize(backend, capacity)
        if not hashes:
            return Change((), tuple(evicted))
        lru = self._lru.get(backend)
        if lru is None:
            lru = self._lru[backend] = OrderedDict()
        # Touched leaf first, root last: the root becomes the most recent entry, so eviction trims chains from
        # their tails (as engines do) instead of cutting a root and orphaning every block after it. Both steps
        # run in C (map over bound methods), not a per-block Python loop.
        rev = hashes[::-1]
        new = list(filterfalse(lru.__contains__, rev))
        if new:
            lru.update(dict.fromkeys(new))
            self._owners.add_many(new, self._owners.bit(backend))
        deque(map(lru.move_to_end, rev), maxlen=0)
        evicted += self._evict(backend, lru)
        return Change(tuple(new), tuple(evicted))

    def match(self, hashes: Sequence[int]) -> dict[str, int]:
        """Backend -> leading blocks of ``hashes`` it holds (longest chained prefix; zeros omitted)."""
        return self._owners.match(hashes)

    def forget(self, backend: str) -> None:
        """Drop everything about ``backend`` (removed, or its engine restarted)."""
        lru = self._lru.pop(backend, None)
        if lru is not None:
            bit = self._owners.bit(backend)
            for h in lru:
                self._owners.discard(h, bit)
        self._owners.release(backend)

    def size(self, backend: str) -> int:
        lru = self._lru.get(backend)
        return len(lru) if lru is not None else 0

    def blocks(self, backend: str) -> frozenset[int]:
        lru = self._lru.get(backend)
        return frozenset(lru) if lru is not None else frozenset()

    def _evict(self, backend: str, lru: OrderedDict[int, None]) -> list[int]:
        cap = self.capacity(backend)
        if len(lru) <= cap:
            return []
        evicted = list(islice(lru, len(lru) - cap))  # oldest first; popped and unowned in C
        deque(map(lru.pop, evicted), maxlen=0)
        self._owners.discard_many(evicted, self._owners.bit(backend))
        return evicted
