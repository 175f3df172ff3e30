"""Prompts of exact token lengths for a real tokenizer, in English, Chinese, code and a mix; the simulator's
words unchanged when no tokenizer is named."""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

import pytest
from tokenizerkit import tiny_tokenizer

from infctl.bench.workloads import (
    TEXT_KINDS,
    WORDS,
    LengthDist,
    MixComponent,
    MixtureSpec,
    MixtureWorkload,
    MultiTurnSpec,
    MultiTurnWorkload,
    RandomSpec,
    RandomWorkload,
    RequestSpec,
    SharedPrefixSpec,
    SharedPrefixWorkload,
    make_prompts,
    prefetched,
)
from infctl.errors import ConfigError
from infctl.tokenization import EstimateTokenizer, HFTokenizer, WordTokenizer, load_tokenizer

__all__ = ["tiny_tokenizer"]  # the session fixture, imported for this module's tests

CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture(scope="module")
def tok(tiny_tokenizer: Path) -> HFTokenizer:
    loaded = load_tokenizer(str(tiny_tokenizer))
    assert isinstance(loaded, HFTokenizer)
    return loaded


def counted(tok: Any, spec: RequestSpec) -> int:
    """The request's prompt tokens as the engine counts them with ``tok``."""
    if spec.messages is not None:
        return len(tok.chat_ids(list(spec.messages)))
    assert spec.prompt is not None
    return int(tok.count(spec.prompt))


def text_of(spec: RequestSpec) -> str:
    return spec.prompt if spec.prompt is not None else "".join(m["content"] for m in spec.messages or ())


@pytest.mark.parametrize("api", ["completions", "chat"])
@pytest.mark.parametrize("kind", TEXT_KINDS)
def test_random_prompts_have_exactly_the_tokens_asked_for(tok: Any, kind: Any, api: Any) -> None:
    spec = RandomSpec(input=LengthDist(kind="uniform", low=20, high=900, mean=460))
    asked = RandomWorkload(spec, api, 3).requests()  # the words workload draws the same lengths
    made = RandomWorkload(spec, api, 3, prompts=make_prompts(tok, kind)).requests()
    for want, got in itertools.islice(zip(asked, made, strict=True), 12):
        assert got.input_tokens == counted(tok, got) == want.input_tokens


@pytest.mark.parametrize("kind", TEXT_KINDS)
def test_text_kinds_read_as_their_kind(tok: Any, kind: Any) -> None:
    spec = RandomSpec(input=LengthDist(mean=600))
    text = text_of(next(RandomWorkload(spec, "completions", 0, prompts=make_prompts(tok, kind)).requests()))
    cjk = len(CJK.findall(text)) / len(text)
    if kind == "zh":
        assert cjk > 0.8 and " " not in text
    elif kind == "mixed":
        assert 0.05 < cjk < 0.95 and re.search(r"[a-z]{3}", text)
    else:
        assert cjk == 0
    if kind == "code":
        assert "\n    " in text and "(" in text and "=" in text


def test_prompts_are_deterministic_and_unrelated(tok: Any) -> None:
    prompts = make_prompts(tok, "zh")
    spec = RandomSpec(input=LengthDist(mean=200))
    first = [
        text_of(r) for r in itertools.islice(RandomWorkload(spec, "chat", 5, prompts=prompts).requests(), 4)
    ]
    again = [
        text_of(r) for r in itertools.islice(RandomWorkload(spec, "chat", 5, prompts=prompts).requests(), 4)
    ]
    assert first == again and len(set(first)) == 4
    assert len({t[:8] for t in first}) == 4  # no two share even their first characters


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_shared_prefix_groups_share_their_prefix_and_count_exactly(tok: Any, api: Any) -> None:
    spec = SharedPrefixSpec(groups=2, prefix_tokens=300, zipf=0, input=LengthDist(mean=50))
    work = SharedPrefixWorkload(spec, api, 1, prompts=make_prompts(tok, "zh"))
    prefixes = work.prefixes()
    assert [tok.count(p, special=False) for p in prefixes] == [300, 300]
    seen = set()
    for r in itertools.islice(work.requests(), 10):
        assert r.group is not None and text_of(r).startswith(prefixes[r.group])
        alone = {"prompt": prefixes[r.group]}
        if api == "chat":
            alone = {"messages": ({"role": "user", "content": prefixes[r.group]},)}
        in_context = counted(tok, RequestSpec(0, 0, **alone))  # type: ignore[arg-type]
        assert r.input_tokens == counted(tok, r) == in_context + 50
        seen.add(r.group)
    assert seen == {0, 1}


def test_mixture_and_multi_turn_count_with_the_tokenizer(tok: Any) -> None:
    mix = MixtureSpec(
        components=[MixComponent(weight=1, input=LengthDist(mean=64), output=LengthDist(mean=8))]
    )
    for r in itertools.islice(
        MixtureWorkload(mix, "chat", 0, prompts=make_prompts(tok, "code")).requests(), 5
    ):
        assert r.input_tokens == counted(tok, r) == 64
    turns = MultiTurnSpec(conversations=2, turns=3, system_tokens=40, input=LengthDist(mean=30))
    for api in ("chat", "completions"):
        work = MultiTurnWorkload(turns, api, 0, prompts=make_prompts(tok, "mixed"))
        specs = list(itertools.islice(work.requests(), 6))
        assert all(r.input_tokens == counted(tok, r) for r in specs)
        if api == "completions":  # the history rendered by the model's chat template
            assert all(r.prompt and r.prompt.startswith("<|im_start|>system\n") for r in specs)
        lengths = [r.input_tokens for r in specs if r.session == 0]
        assert lengths == sorted(lengths) and len(lengths) == 3  # each turn resends a longer history


def test_without_a_tokenizer_english_is_the_simulators_words() -> None:
    assert make_prompts(None, "en") is WORDS and make_prompts(WordTokenizer(), "en") is WORDS
    spec = RandomSpec(input=LengthDist(mean=100))
    r = next(RandomWorkload(spec, "chat", 0, prompts=make_prompts(None, "en")).requests())
    assert r.messages is not None and len(r.messages[0]["content"].split()) == 98  # + 2 chat markers


def test_other_text_without_a_tokenizer_is_cut_by_the_estimate() -> None:
    r = next(RandomWorkload(RandomSpec(input=LengthDist(mean=300)), "completions", 0,
                            prompts=make_prompts(None, "zh")).requests())  # fmt: skip
    assert r.prompt is not None and r.input_tokens == EstimateTokenizer().count(r.prompt) == 300
    with pytest.raises(ConfigError, match="whitespace words"):
        make_prompts(WordTokenizer(), "zh")


def test_prefetched_yields_the_same_requests_and_raises_what_the_workload_raises(tok: Any) -> None:
    work = RandomWorkload(RandomSpec(input=LengthDist(mean=64)), "chat", 2, prompts=make_prompts(tok, "en"))
    ahead = prefetched(work.requests(), depth=4)
    assert list(itertools.islice(ahead, 10)) == list(itertools.islice(work.requests(), 10))
    ahead.close()

    def broken() -> Any:
        yield next(work.requests())
        raise ConfigError("bad workload")

    out = prefetched(broken())
    assert next(out).input_tokens == 64
    with pytest.raises(ConfigError, match="bad workload"):
        next(out)
