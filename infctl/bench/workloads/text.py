"""Filler text with an exact word count, reproducible from a salt.

``words(n, salt)`` is prefix-stable: its first ``k`` words are ``words(k, salt)``; so a block cut short
keeps the prefix property. Different salts share no word, so unrelated prompts share no cached prefix.
"""

from __future__ import annotations

import random
from collections import OrderedDict

_VOCAB_TEXT = (
    "time year people way day man thing woman life child world school state family student group "
    "country problem hand part place case week company system program question work government number "
    "night point home water room mother area money story fact month lot right study book eye job word "
    "business issue side kind head house service friend father power hour game line end member law car "
    "city community name"
)
_VOCAB = tuple(_VOCAB_TEXT.split())
_STEP = 7  # coprime with len(_VOCAB), so consecutive words cycle through the whole vocabulary

SALT_BITS = 40
"""Bits of a random salt: enough that two draws in one run practically never collide."""


def tag(salt: int) -> str:
    """A short base-36 suffix that makes words of different salts different tokens."""
    salt &= (1 << 64) - 1
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        salt, r = divmod(salt, 36)
        out = digits[r] + out
        if not salt:
            return out


def words(n: int, salt: int) -> str:
    """``n`` whitespace-separated words, none of which any other salt produces."""
    if n <= 0:
        return ""
    t = tag(salt)
    v = _VOCAB
    size = len(v)
    start = salt % size
    return " ".join([f"{v[(start + i * _STEP) % size]}{t}" for i in range(n)])


def unique_words(n: int, rng: random.Random) -> str:
    """``n`` words under a salt drawn from ``rng``: text no other request of the run shares."""
    return words(n, rng.getrandbits(SALT_BITS))


class BlockCache:
    """A small LRU of full blocks' text, since popular blocks (shared prefixes) repeat."""

    def __init__(self, block_words: int, capacity: int = 4096) -> None:
        self.block_words = block_words
        self.capacity = capacity
        self._items: OrderedDict[int, str] = OrderedDict()

    def get(self, salt: int) -> str:
        text = self._items.get(salt)
        if text is None:
            text = words(self.block_words, salt)
            self._items[salt] = text
            if len(self._items) > self.capacity:
                self._items.popitem(last=False)
        else:
            self._items.move_to_end(salt)
        return text
