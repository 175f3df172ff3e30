"""count_tokens is a faster len(text.split()): it must give the same count on every kind of text."""

import random
from pathlib import Path

from infctl.tokens import chat_prompt_text, count_tokens, synth_words

_ALPHABET = "ab Z9 \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f.,"
_UNICODE = "\x85\xa0\u2003\u3000é漢\u200b"


def _corpus() -> list[str]:
    rng = random.Random(7)
    texts = ["", " ", "  ", "a", " a", "a ", "a  b", "\x1ca\x1fb\x0bc", "a\tb\r\nc", "x" * 1000]
    texts += [synth_words(n, salt) for n, salt in [(1, 0), (17, 3), (4096, 9)]]
    texts += ["".join(rng.choice(_ALPHABET) for _ in range(rng.randrange(0, 200))) for _ in range(500)]
    texts += [
        "".join(rng.choice(_ALPHABET + _UNICODE) for _ in range(rng.randrange(0, 200))) for _ in range(500)
    ]
    texts += [
        chat_prompt_text([{"role": "system", "content": "be brief\n\n"}, {"role": "user", "content": t}])
        for t in texts[:50]
    ]
    return texts


def test_count_equals_split_on_a_corpus() -> None:
    corpus = _corpus()
    assert sum(count_tokens(t) for t in corpus) > 10_000  # the corpus is not trivially empty
    assert [count_tokens(t) for t in corpus] == [len(t.split()) for t in corpus]


def test_count_equals_split_on_every_single_character() -> None:
    for c in map(chr, range(0x3100)):
        for text in (c, f"a{c}b", f"{c}{c}x{c}"):
            assert count_tokens(text) == len(text.split()), repr(text)


def test_count_equals_split_on_real_documents() -> None:
    root = Path(__file__).parents[2]
    docs = [p.read_text() for p in (root / "README.md", root / "CHANGELOG.md", root / "infctl" / "tokens.py")]
    lines = [line for d in docs for line in d.splitlines(keepends=True)]
    assert [count_tokens(t) for t in docs + lines] == [len(t.split()) for t in docs + lines]
