"""Synthetic single-turn workloads: random lengths, weighted mixtures, shared-prefix groups."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from infctl.bench.workloads.base import EndlessWorkload, RequestSpec
from infctl.bench.workloads.prompts import WORDS, Prompts
from infctl.bench.workloads.specs import MixtureSpec, RandomSpec, SharedPrefixSpec
from infctl.bench.workloads.text import SALT_BITS


def group_salt(seed: int, purpose: str, index: int) -> int:
    """A salt that depends only on (seed, purpose, index): stable whatever else the run draws."""
    return random.Random(f"{seed}/{purpose}/{index}").getrandbits(SALT_BITS)


@dataclass(frozen=True)
class RandomWorkload(EndlessWorkload[RandomSpec]):
    name: str = "random"
    prompts: Prompts = WORDS

    def requests(self) -> Iterator[RequestSpec]:
        rng = random.Random(self.seed)
        while True:
            n = self.spec.input.sample(rng)
            out = self.spec.output.sample(rng)
            yield self.prompts.single(self.api, n, out, rng)


@dataclass(frozen=True)
class MixtureWorkload(EndlessWorkload[MixtureSpec]):
    name: str = "mixture"
    prompts: Prompts = WORDS

    def requests(self) -> Iterator[RequestSpec]:
        rng = random.Random(self.seed)
        parts = self.spec.components
        cum = list(itertools.accumulate(c.weight for c in parts))
        indices = range(len(parts))
        while True:
            k = rng.choices(indices, cum_weights=cum)[0]
            n = parts[k].input.sample(rng)
            out = parts[k].output.sample(rng)
            yield self.prompts.single(self.api, n, out, rng, group=k)


def zipf_weights(n: int, s: float) -> list[float]:
    """Cumulative weights of ranks 0..n-1 with probability proportional to 1 / (rank + 1)^s."""
    return list(itertools.accumulate(1.0 / (k + 1) ** s for k in range(n)))


@dataclass(frozen=True)
class SharedPrefixWorkload(EndlessWorkload[SharedPrefixSpec]):
    name: str = "shared-prefix"
    prompts: Prompts = WORDS

    def prefixes(self) -> Sequence[str]:
        p = self.spec.prefix_tokens
        return [self.prompts.prefix(p, group_salt(self.seed, "prefix", g)) for g in range(self.spec.groups)]

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
            yield self.prompts.after_prefix(self.api, prefixes[g], p, s, out, rng, group=g)
