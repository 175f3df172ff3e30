"""When the estimate decides as the model's tokenizer would, so exact tokenizing can wait.

The model's tokenizer costs ~1.5-4 ms of CPU per 2,000 tokens here; the estimate ~0.05 ms. The decisions that
hang on a prompt's count are threshold tests (a length bucket's bound, the PD threshold), and the exact count
lies within a band around the estimate: the ratio exact/estimate. When no threshold falls inside the band,
the estimate's answer is the exact one and the request need not wait for the tokenizer.

The counts seen also give each class's overall ratio (exact tokens over estimated tokens), which scales the
estimate of a prompt left uncounted: the router's token totals stay unbiased when only a sample is counted.

The band starts at ``STARTING`` (tokenizers differ by 2x on Chinese; English and code fall well inside) and
widens, never narrows, with every exact count seen, per script class: prompts the estimate counts at about
4 characters a token (ASCII) and the rest. A prompt outside the band is a ``miss``: its decision may have
differed from the exact one, and the band then covers it with ``MARGIN`` to spare.
"""

from __future__ import annotations

from collections.abc import Iterable

STARTING = (0.5, 2.0)
"""Ratio exact/estimate assumed before any exact count is seen."""
MARGIN = 1.25
"""How far beyond an observed ratio the band is widened."""


class RatioBand:
    def __init__(self) -> None:
        self._lo = {False: STARTING[0], True: STARTING[0]}
        self._hi = {False: STARTING[1], True: STARTING[1]}
        self.seen = 0
        """Exact counts observed."""
        self.misses = 0
        """Of them, outside the band as it stood."""
        self._exact = {False: 0, True: 0}
        self._estimated = {False: 0, True: 0}

    @staticmethod
    def _ascii(chars: int, estimate: int) -> bool:
        # The estimate spends a token per 4 ASCII bytes and one per other character.
        return estimate * 2 <= chars

    def bounds(self, chars: int, estimate: int) -> tuple[float, float]:
        """The exact count's possible range (tokens) for a prompt of ``chars`` characters estimated at
        ``estimate`` tokens."""
        key = self._ascii(chars, estimate)
        return estimate * self._lo[key], estimate * self._hi[key]

    def decides(self, chars: int, estimate: int, thresholds: Iterable[int]) -> bool:
        """Whether every count in the band is on one side of each threshold (a test ``count <= t``)."""
        lo, hi = self.bounds(chars, estimate)
        return all(t < lo or t >= hi for t in thresholds)

    def scaled(self, chars: int, estimate: int) -> int:
        """The estimate times its class's ratio over every exact count seen (the estimate itself before
        any): the expected exact count of a prompt that is not counted."""
        key = self._ascii(chars, estimate)
        seen = self._estimated[key]
        return round(estimate * self._exact[key] / seen) if seen else estimate

    def observe(self, chars: int, estimate: int, exact: int) -> bool:
        """Widen the band to an exact count; True when it lay outside (a miss)."""
        if estimate <= 0:
            return False
        key = self._ascii(chars, estimate)
        ratio = exact / estimate
        self.seen += 1
        self._exact[key] += exact
        self._estimated[key] += estimate
        lo, hi = self._lo[key], self._hi[key]
        if lo <= ratio <= hi:
            return False
        self.misses += 1
        self._lo[key] = min(lo, ratio / MARGIN)
        self._hi[key] = max(hi, ratio * MARGIN)
        return True
