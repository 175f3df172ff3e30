"""Workload generators: determinism, exact token counts, and the statistics they promise."""

from __future__ import annotations

import itertools
import statistics
from collections import Counter

import pytest

from infctl import tokens
from infctl.bench.workloads import (
    LengthDist,
    MixComponent,
    MixtureSpec,
    MultiTurnSpec,
    RandomSpec,
    RequestSpec,
    SharedPrefixSpec,
    build_workload,
)
from infctl.bench.workloads.synthetic import zipf_weights


def take(spec: object, n: int, api: str = "completions", seed: int = 0) -> list[RequestSpec]:
    return list(itertools.islice(build_workload(spec, api, seed).requests(), n))  # type: ignore[arg-type]


def engine_tokens(r: RequestSpec) -> int:
    """What the simulated engine counts for this request (infctl.tokens convention)."""
    if r.messages is not None:
        return tokens.count_tokens(tokens.chat_prompt_text(r.messages))
    return tokens.count_tokens(r.prompt or "")


SPECS = [
    RandomSpec(input=LengthDist.parse("normal:300,50"), output=LengthDist.parse("uniform:1,9")),
    MixtureSpec(
        components=[
            MixComponent(weight=1, input=LengthDist(mean=20), output=LengthDist(mean=3)),
            MixComponent(weight=1, input=LengthDist(mean=900), output=LengthDist(mean=3)),
        ]
    ),
    SharedPrefixSpec(groups=3, prefix_tokens=100, input=LengthDist.parse("uniform:5,50")),
    MultiTurnSpec(
        conversations=3, turns=4, system_tokens=10, input=LengthDist(mean=20), output=LengthDist(mean=7)
    ),
]


@pytest.mark.parametrize("api", ["completions", "chat"])
@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.kind)
def test_token_counts_are_exact_and_runs_repeat(spec: object, api: str) -> None:
    reqs = take(spec, 60, api, seed=5)
    assert all(engine_tokens(r) == r.input_tokens for r in reqs)
    assert all((r.messages is not None) == (api == "chat") for r in reqs)
    assert reqs == take(spec, 60, api, seed=5)
    assert reqs != take(spec, 60, api, seed=6)


def test_generated_workloads_are_endless_untimed_and_named_by_kind() -> None:
    one = MixComponent(weight=1, input=LengthDist(), output=LengthDist())
    specs: list[RandomSpec | MixtureSpec | SharedPrefixSpec | MultiTurnSpec] = [
        RandomSpec(),
        MixtureSpec(components=[one]),
        SharedPrefixSpec(),
        MultiTurnSpec(),
    ]
    built = [build_workload(s, "chat", 1) for s in specs]
    assert [(w.name, w.size, w.timed) for w in built] == [(s.kind, None, False) for s in specs]


def test_random_lengths_follow_their_distributions() -> None:
    n = 6000
    normal = [r.input_tokens for r in take(RandomSpec(input=LengthDist.parse("normal:200,30")), n)]
    assert statistics.fmean(normal) == pytest.approx(200, abs=1.5)
    assert statistics.pstdev(normal) == pytest.approx(30, rel=0.05)
    logn = [
        r.max_tokens
        for r in take(RandomSpec(input=LengthDist(mean=1), output=LengthDist.parse("lognormal:200,0.5")), n)
    ]
    assert statistics.fmean(logn) == pytest.approx(200, rel=0.03)
    assert statistics.median(logn) == pytest.approx(200 * 2.718281828 ** (-0.125), rel=0.04)  # exp(mu)
    uni = [r.input_tokens for r in take(RandomSpec(input=LengthDist.parse("uniform:100,200")), n // 2)]
    assert min(uni) >= 100 and max(uni) <= 200 and statistics.fmean(uni) == pytest.approx(150, abs=2)
    chat = take(RandomSpec(input=LengthDist(mean=50)), 5, "chat")
    assert {r.input_tokens for r in chat} == {50}  # markers are part of the count, not extra


def test_prompts_share_nothing_across_requests() -> None:
    a, b = take(RandomSpec(input=LengthDist(mean=30)), 2)
    assert not set((a.prompt or "").split()) & set((b.prompt or "").split())


def test_mixture_weights() -> None:
    spec = MixtureSpec(
        components=[
            MixComponent(weight=0.8, input=LengthDist(mean=10), output=LengthDist(mean=1)),
            MixComponent(weight=0.2, input=LengthDist(mean=99), output=LengthDist(mean=1)),
        ]
    )
    groups = Counter(r.group for r in take(spec, 5000))
    assert groups[0] / 5000 == pytest.approx(0.8, abs=0.02)
    assert {r.input_tokens for r in take(spec, 50)} == {10, 99}


def test_shared_prefix_groups_and_zipf_popularity() -> None:
    spec = SharedPrefixSpec(groups=5, prefix_tokens=64, zipf=1.2, input=LengthDist(mean=8))
    reqs = take(spec, 8000)
    counts = Counter(r.group for r in reqs)
    cum = zipf_weights(5, 1.2)
    for k in range(5):
        expected = (cum[k] - (cum[k - 1] if k else 0.0)) / cum[-1]
        assert counts[k] / len(reqs) == pytest.approx(expected, abs=0.02)
    by_group: dict[int, set[str]] = {}
    for r in reqs[:200]:
        by_group.setdefault(r.group or 0, set()).add(" ".join((r.prompt or "").split()[:64]))
    assert all(len(prefixes) == 1 for prefixes in by_group.values())  # one prefix per group
    assert len({next(iter(p)) for p in by_group.values()}) == len(by_group)  # and distinct groups differ
    uniform = Counter(r.group for r in take(SharedPrefixSpec(groups=4, zipf=0, prefix_tokens=4), 4000))
    assert all(c / 4000 == pytest.approx(0.25, abs=0.03) for c in uniform.values())


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_multi_turn_history_grows_and_keeps_its_prefix(api: str) -> None:
    spec = MultiTurnSpec(conversations=2, turns=3, input=LengthDist(mean=10), output=LengthDist(mean=5))
    reqs = take(spec, 12, api)
    assert [r.session for r in reqs] == [0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3]
    for sid in range(4):
        turns = [r for r in reqs if r.session == sid]
        rendered = [tokens.chat_prompt_text(r.messages) if r.messages else r.prompt or "" for r in turns]
        assert all(b.startswith(a.removesuffix("<|assistant|>")) for a, b in itertools.pairwise(rendered))
        assert [r.input_tokens for r in turns] == [12, 12 + 6 + 11, 12 + 2 * (6 + 11)]  # markers + words
