"""Deterministic prompt text in English, Chinese, code or a mix, as a stream of small units.

A unit is a piece a real tokenizer spends about one token on (an English word with its leading space, one
Chinese character or punctuation mark, an identifier or symbol of code), so a prompt of N tokens is cut
from the first ~N units of its stream (``infctl.bench.workloads.prompts``). A stream depends only on its
kind and salt: equal salts give equal text, different salts text that shares no prefix beyond a few units.

* ``en``: common English words, with commas and full stops;
* ``zh``: GB2312's 3,755 level-1 (common) hanzi drawn by a Zipf law over a fixed frequency ranking, in
  clauses with Chinese punctuation, as real Chinese text is: no spaces;
* ``code``: Python- and C-like lines (identifiers, indentation, operators, numbers);
* ``mixed``: paragraphs of the three in turn, switching every 20-80 units.
"""

from __future__ import annotations

import functools
import itertools
import random
from collections.abc import Iterator
from typing import Literal

from infctl.tokens import gb2312_level1

TextKind = Literal["en", "zh", "code", "mixed"]
TEXT_KINDS: tuple[TextKind, ...] = ("en", "zh", "code", "mixed")

_EN_TEXT = (
    "the of and to in is that for it as was with be by on not he this are or his from at which but "
    "have an they you were her she there one all we their can has more will would been if when so no "
    "what up out time year people way day man thing woman life child world school state family "
    "student group country problem hand part place case week company system program question work "
    "government number night point home water room mother area money story fact month lot right study "
    "book eye job word business issue side kind head house service friend father power hour game line "
    "end member law car city community name"
)
_EN = tuple(_EN_TEXT.split())
_COMMON_HANZI = (
    "的一是不了在人有我他这个们中来上大为和国地到以说时要就出会可也你对生能而子那得于着下自之年过发后作里"
    "用道行所然家种事成方多经么去法学如都同现当没动面起看定天分还进好小部其些主样理心她本前开但因只从想实日"
)
"""The most frequent Chinese characters, most frequent first: the head of the ranking."""
_ZH_COMMA, _ZH_ENDS = "\uff0c", ("\u3002", "\uff1f", "\uff01", "\uff1b")
_SYMBOLS = ("(", ")", ", ", " = ", ".", "[", "]", " + ", " == ", ":", ";", " {", "}", "->", " += ")


@functools.cache
def hanzi() -> tuple[tuple[str, ...], tuple[float, ...]]:
    """Level-1 hanzi ranked (the common head first, the rest in a fixed order) and the cumulative Zipf
    weights ``1 / (rank + 20)`` of the ranks."""
    chars = gb2312_level1()
    head = list(dict.fromkeys(_COMMON_HANZI))
    rest = [c for c in chars if c not in set(head)]
    random.Random(0).shuffle(rest)
    ranked = tuple(head + rest)
    return ranked, tuple(itertools.accumulate(1.0 / (r + 20) for r in range(len(ranked))))


def units(kind: TextKind, salt: int) -> Iterator[str]:
    """The endless unit stream of ``kind`` under ``salt``; ``"".join`` of a prefix is the prompt text."""
    rng = random.Random(salt)
    if kind == "en":
        return _english(rng)
    if kind == "zh":
        return _chinese(rng)
    if kind == "code":
        return _code(rng)
    return _mixed(rng)


def _english(rng: random.Random) -> Iterator[str]:
    first = True
    while True:
        for _ in range(rng.randint(6, 18)):
            word = rng.choice(_EN)
            yield word if first else f" {word}"
            first = False
        yield rng.choice((",", ",", "."))


def _chinese(rng: random.Random) -> Iterator[str]:
    ranked, cumulative = hanzi()
    while True:
        yield from rng.choices(ranked, cum_weights=cumulative, k=rng.randint(4, 18))
        yield _ZH_COMMA if rng.random() < 0.7 else rng.choice(_ZH_ENDS)


def _code(rng: random.Random) -> Iterator[str]:
    def name() -> str:
        return "_".join(rng.choice(_EN) for _ in range(rng.randint(1, 3)))

    depth = 0
    while True:
        yield "    " * depth
        if rng.random() < 0.2:
            yield rng.choice(("def ", "for ", "if ", "while ", "return "))
            depth = min(depth + 1, 3)
        elif rng.random() < 0.2:
            depth = max(depth - 1, 0)
        for _ in range(rng.randint(2, 7)):
            yield name()
            yield rng.choice(_SYMBOLS)
            if rng.random() < 0.3:
                yield str(rng.randint(0, 999))
        yield "\n"


def _mixed(rng: random.Random) -> Iterator[str]:
    streams = [_english(rng), _chinese(rng), _code(rng)]
    for i in itertools.count(rng.randrange(3)):  # each kind in turn, from a random one
        yield from itertools.islice(streams[i % 3], rng.randint(20, 80))
        yield "\n"
