"""Synthetic single-turn workloads: random lengths, weighted mixtures, shared-prefix groups."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from infctl.bench.workloads.base import EndlessWorkload, RequestSpec, overhead, single_prompt
from infctl.bench.workloads.specs import MixtureSpec, RandomSpec, SharedPrefixSpec
from infctl.bench.workloads.text import SALT_BITS, unique_words, words


def group_salt(seed: int, purpose: str, index: int) -> int:
    """A salt that depends only on (seed, purpose, index): stable whatever else the run draws."""
    return random.Random(f"{seed}/{purpose}/{index}").getrandbits(SALT_BITS)


@dataclass(frozen=True)
class RandomWorkload(EndlessWorkload[RandomSpec]):
    name: str = "random"

    def requests(self) -> Iterator[RequestSpec]:
        rng = random.Random(self.seed)
        ov = overhead(self.api)
        while True:
            n = max(1, self.spec.input.sample(rng) - ov)
            out = self.spec.output.sample(rng)
            yield single_prompt(self.api, unique_words(n, rng), n, out)


@dataclass(frozen=True)
class MixtureWorkload(EndlessWorkload[MixtureSpec]):
    name: str = "mixture"

    def requests(self) -> Iterator[RequestSpec]:
        rng = random.Random(self.seed)
        ov = overhead(self.api)
        parts = self.spec.components
        cum = list(itertools.accumulate(c.weight for c in parts))
        indices = range(len(parts))
        while True:
            k = rng.choices(indices, cum_weights=cum)[0]
            n = max(1, parts[k].input.sample(rng) - ov)
            out = parts[k].output.sample(rng)
            yield single_prompt(self.api, unique_words(n, rng), n, out, group=k)


def zipf_weights(n: int, s: float) -> list[float]:
    """Cumulative weights of ranks 0..n-1 with probability proportional to 1 / (rank + 1)^s."""
    return list(itertools.accumulate(1.0 / (k + 1) ** s for k in range(n)))


@dataclass(frozen=True)
class SharedPrefixWorkload(EndlessWorkload[SharedPrefixSpec]):
    name: str = "shared-prefix"

    def prefixes(self) -> Sequence[str]:
        p = self.spec.prefix_tokens
        return [words(p, group_salt(self.seed, "prefix", g)) for g in range(self.spec.groups)]

    def requests(self) -> Iterator[RequestSpec]:
        rng = random.Random(self.seed)
        prefixes = self.prefixes()
        cum = zipf_weights(self.spec.groups, self.spec.zipf)
        groups = range(self.spec.groups)
        p = self.spec.prefix_tokens
        while True:
            g = rng.choices(groups, cum_weights=cum)[0]
            s = self.spec.input.sample(rng)
            out = self.spec.output.sample(rng)
            text = f"{prefixes[g]} {unique_words(s, rng)}"
            yield single_prompt(self.api, text, p + s, out, group=g)
