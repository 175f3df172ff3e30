"""The language-independent estimate: near a real tokenizer in every script, prefix-stable, never the
whitespace-word count."""

from __future__ import annotations

import random
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from tokenizerkit import chinese, code, english, tiny_tokenizer

from infctl.tokenization import EstimateTokenizer, WordTokenizer, load_tokenizer

__all__ = ["tiny_tokenizer"]
EST = EstimateTokenizer()


def test_auto_and_estimate_are_the_estimate() -> None:
    assert load_tokenizer("auto").name == load_tokenizer("estimate").name == "estimate"
    assert not EST.exact and isinstance(load_tokenizer("words"), WordTokenizer)


def test_within_bounds_of_a_real_tokenizer_in_english_chinese_and_code(tiny_tokenizer: Path) -> None:
    real = load_tokenizer(str(tiny_tokenizer))
    rng = random.Random(7)
    samples = {"english": english(rng, 2000), "chinese": chinese(rng, 3000), "code": code(rng, 200)}
    ratios = {k: EST.count(t) / real.count(t) for k, t in samples.items()}
    # A 2,000-token vocabulary spends more tokens than production ones do (the estimate's target), so
    # these bounds are loose on the low side; what matters is the order of magnitude, by script.
    assert 0.4 < ratios["english"] < 1.5, ratios
    assert 0.5 < ratios["chinese"] < 2.0, ratios
    assert 0.2 < ratios["code"] < 1.5, ratios
    assert WordTokenizer().count(samples["chinese"]) < real.count(samples["chinese"]) / 100


@given(st.text(max_size=300), st.text(max_size=300))
def test_ids_of_a_prefix_are_a_prefix_and_counts_match(a: str, b: str) -> None:
    whole, head = EST.encode(a + b), EST.encode(a)
    assert len(whole) == EST.count(a + b) and len(head) == EST.count(a)
    # Every full token of the prefix is shared (the last one may merge with what follows).
    assert whole[: max(0, len(head) - 1)] == head[: max(0, len(head) - 1)]


def test_three_thousand_chinese_characters_are_thousands_of_tokens() -> None:
    text = "长短请求分开处理可以降低首字延迟" * 188
    assert EST.count(text) == len(text) >= 3000
    assert WordTokenizer().count(text) == 1
