"""Stable 64-bit hashing for decisions that several router replicas must agree on.

Python's ``hash()`` of a string changes with every process, so anything that breaks a tie, samples at random
or splits traffic uses these instead: a replica restarted tomorrow, or its twin on another node, gets the same
numbers.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

_MASK = (1 << 64) - 1
_UNIT = 1.0 / (1 << 64)


def stable_hash(text: str, salt: str = "") -> int:
    """A 64-bit hash of ``text`` (and ``salt``) that is the same in every process and on every machine."""
    # JSON allows lone surrogates, which strict UTF-8 refuses.
    data = (f"{salt}\x00{text}" if salt else text).encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


def mix(a: int, b: int) -> int:
    """Combine two 64-bit hashes (splitmix64 finaliser): cheap enough to run per candidate per request."""
    z = (a ^ (b * 0x9E3779B97F4A7C15)) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def unit(h: int) -> float:
    """Map a 64-bit hash to [0, 1)."""
    return (h & _MASK) * _UNIT


def open_unit(h: int) -> float:
    """Map a 64-bit hash to (0, 1), for formulas that take a logarithm."""
    return ((h & _MASK) + 0.5) * _UNIT


def rendezvous(seed: int, keys: Sequence[int], weights: Sequence[float]) -> int:
    """Weighted rendezvous hashing: the index i maximising w_i / -ln(u_i), u_i = hash(seed, key_i) in (0, 1).

    Item i wins with probability exactly w_i / sum(w), the winner does not depend on list order, and removing
    an item only moves the seeds it owned. Items with weight <= 0 never win; -1 when none has weight.
    """
    if weights and all(w == weights[0] for w in weights):
        if weights[0] <= 0:
            return -1
        hashes = [mix(seed, k) for k in keys]  # equal weights: the largest hash wins, no logarithm needed
        return hashes.index(max(hashes))
    best, best_i = -math.inf, -1
    for i, (k, w) in enumerate(zip(keys, weights, strict=True)):
        if w > 0:
            score = -w / math.log(open_unit(mix(seed, k)))
            if score > best:
                best, best_i = score, i
    return best_i
