"""How many prompt tokens a trace could find cached at all: the ceilings a router's hit rate sits under.

Three figures for the same requests (in arrival order) and a fleet of ``engines`` caches of ``blocks`` each:

- ``reuse``: every block some earlier request sent is a hit (an unbounded cache). Nothing beats it.
- ``pooled_min``: one cache of the fleet's total size (``engines x blocks``) evicting by Belady's MIN, the
  optimal offline rule (the block whose next use is farthest goes; a block used later than everything held
  is not stored at all). An upper bound for any router over these engines: whatever they hold at any
  moment is at most that many distinct blocks, each stored after a request sent it. (Strictly, the bound
  assumes a block is stored when its request arrives; an engine stores it when the queued prefill ends,
  a second-order difference.)
- ``pooled_lru``: the same pooled cache evicting least-recently-used blocks, as each engine does. Not a
  bound (a router can beat it by keeping blocks that will not come back out of the caches that matter), but
  what "the four caches acting as one" means for LRU engines: the gap to it is what duplicates and routing
  away from the holder cost; the gap from it to ``pooled_min`` is what LRU eviction costs.
- ``pooled_lru_skip``: that LRU cache never storing a block no later request sends (an admission filter
  with hindsight). Not a bound either: how much of LRU's loss is one-off blocks pushing out ones that
  come back, a loss only the engine's cache policy can recover (every routing stores them somewhere).

A hit counts only inside the prompt's leading run of held blocks, as an engine's prefix cache counts it.
Rates are cached prompt tokens over prompt tokens (the engines' own counter), blocks x ``block_size``.
Pure: a few seconds for the Mooncake trace (~10^6 block accesses).
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from infctl.router.snapshot import RequestInfo

_NEVER = 1 << 62
"""Next use of a block no later request sends."""


@dataclass(frozen=True, slots=True)
class Ceilings:
    """Hit blocks of each ceiling over one trace (see the module docstring)."""

    prompt_tokens: int
    block_size: int
    capacity_blocks: int
    """The pooled cache's size: engines x blocks per engine."""
    reuse: int
    pooled_min: int
    pooled_lru: int
    pooled_lru_skip: int

    def rate(self, hit_blocks: int) -> float:
        """Cached prompt tokens over prompt tokens for ``hit_blocks`` hits."""
        return hit_blocks * self.block_size / self.prompt_tokens if self.prompt_tokens else 0.0

    def rates(self) -> dict[str, float]:
        """Each ceiling's hit rate, by name: reuse, pooled_min, pooled_lru, pooled_lru_skip."""
        names = ("reuse", "pooled_min", "pooled_lru", "pooled_lru_skip")
        return {k: self.rate(getattr(self, k)) for k in names}

    def describe(self) -> str:
        """One line for a benchmark's header: each ceiling's hit rate and whether it bounds a router."""
        r = {k: v * 100 for k, v in self.rates().items()}
        return (
            f"ceilings of these requests: every block sent before {r['reuse']:.1f}%; one pooled cache of "
            f"{self.capacity_blocks} blocks under MIN {r['pooled_min']:.1f}% (no router can beat it: "
            f"/MIN), under LRU {r['pooled_lru']:.1f}% (the engines' eviction, not a bound; storing no "
            f"one-off block {r['pooled_lru_skip']:.1f}%)"
        )


def ceilings(requests: Sequence[RequestInfo], engines: int, blocks: int) -> Ceilings:
    """The three ceilings of ``requests`` (arrival order) on ``engines`` caches of ``blocks`` blocks."""
    capacity = engines * blocks
    return Ceilings(
        prompt_tokens=sum(r.prompt_tokens for r in requests),
        block_size=requests[0].block_size if requests else 16,
        capacity_blocks=capacity,
        reuse=reuse_hits(requests),
        pooled_min=min_hits(requests, capacity),
        pooled_lru=lru_hits(requests, capacity),
        pooled_lru_skip=lru_hits(requests, capacity, skip_one_offs=True),
    )


def _leading(hashes: Sequence[int], held: object) -> int:
    n = 0
    for h in hashes:
        if h not in held:  # type: ignore[operator]
            break
        n += 1
    return n


def reuse_hits(requests: Sequence[RequestInfo]) -> int:
    """Leading prompt blocks some earlier request sent."""
    seen: set[int] = set()
    hits = 0
    for r in requests:
        hits += _leading(r.block_hashes, seen)
        seen.update(r.block_hashes)
    return hits


def lru_hits(requests: Sequence[RequestInfo], capacity: int, *, skip_one_offs: bool = False) -> int:
    """Leading prompt blocks a single LRU cache of ``capacity`` blocks holds (a request's blocks become the
    most recent, its first block last so a prefix's tail is evicted before its head). ``skip_one_offs``:
    a block no later request sends is not stored (and dropped if held)."""
    nxt = _next_uses(requests) if skip_one_offs else None
    cache: OrderedDict[int, None] = OrderedDict()
    hits = k = 0
    for r in requests:
        hits += _leading(r.block_hashes, cache)
        k += len(r.block_hashes)
        for j, h in enumerate(reversed(r.block_hashes), 1):
            if nxt is not None and nxt[k - j] == _NEVER:
                cache.pop(h, None)
                continue
            cache[h] = None
            cache.move_to_end(h)
        while len(cache) > capacity:
            cache.popitem(last=False)
    return hits


def _next_uses(requests: Sequence[RequestInfo]) -> list[int]:
    """For each block access (requests' blocks in order), the position of the same block's next access."""
    flat = [h for r in requests for h in r.block_hashes]
    nxt = [_NEVER] * len(flat)
    last: dict[int, int] = {}
    for k in range(len(flat) - 1, -1, -1):
        nxt[k] = last.get(flat[k], _NEVER)
        last[flat[k]] = k
    return nxt


def min_hits(requests: Sequence[RequestInfo], capacity: int) -> int:
    """Leading prompt blocks one cache of ``capacity`` blocks holds under Belady's MIN with bypass.

    A block's next use always comes after its parent's (every request sending it sends the parent first),
    so MIN drops a prefix's tail before its head and its hits are leading runs already."""
    nxt = _next_uses(requests)
    held: dict[int, int] = {}
    """Block -> its next use."""
    farthest: list[tuple[int, int]] = []
    """Max-heap of (-next use, block), stale entries skipped."""
    hits = k = 0
    for r in requests:
        leading = True
        for h in r.block_hashes:
            nu, k = nxt[k], k + 1
            if h in held:
                hits += leading
            else:
                leading = False
                if nu == _NEVER:
                    continue
                if len(held) >= capacity:
                    while -farthest[0][0] != held.get(farthest[0][1]):
                        heapq.heappop(farthest)
                    if -farthest[0][0] <= nu:
                        continue  # everything held comes back sooner: do not store this one
                    del held[heapq.heappop(farthest)[1]]
            held[h] = nu
            heapq.heappush(farthest, (-nu, h))
    return hits
