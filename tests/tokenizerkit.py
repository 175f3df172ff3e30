"""A small real multilingual tokenizer for tests, built offline: no download, about a second to train.

``build_tokenizer(directory)`` writes what vLLM and SGLang read from a model directory, ``tokenizer.json``
and ``tokenizer_config.json`` (with the chat template), and returns the directory; the ``tiny_tokenizer``
fixture builds one per test session. Load it with ``infctl.tokenization.load_tokenizer(str(path))`` or pass
the path as any ``--tokenizer``/``tokenizer=`` setting.

The tokenizer is a byte-level BPE of :data:`VOCAB` tokens over the full byte alphabet (any UTF-8 text encodes;
there is no unknown token), pre-tokenized like Qwen2's, trained on a fixed mixed corpus: English words,
Chinese sentences drawn from GB2312's level-1 hanzi with a Zipf law (common characters merge to one token,
the rest stay two or three byte tokens, so Chinese costs about a token a character as on real models), and
Python/C-like code. The chat template is ChatML, with ``<|im_start|>``/``<|im_end|>`` as special tokens; no
BOS token is added. The text helpers (:func:`english`, :func:`chinese`, :func:`code`) write prompts in the
same three kinds of text, deterministically.

Imported by name (``from tokenizerkit import tiny_tokenizer``): pytest puts tests/ on sys.path for the root
conftest. Importing the fixture into a test module makes it available there.
"""

from __future__ import annotations

import functools
import itertools
import json
import random
import shutil
from pathlib import Path

import pytest

from infctl.tokens import gb2312_level1

VOCAB = 2000
SEED = 0
ENDOFTEXT, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
SPECIAL = (ENDOFTEXT, IM_START, IM_END)
"""Ids 0, 1, 2. As in Qwen2's tokenizer: ``<|im_end|>`` ends a chat turn (the EOS), ``<|endoftext|>`` pads."""
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
"""ChatML without a default system prompt: ``<|im_start|>{role}\\n{content}<|im_end|>\\n`` per message, and
``<|im_start|>assistant\\n`` for the generation prompt."""
SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
"""Qwen2's pre-tokenizer: words with their leading space, digits one by one, punctuation runs, newlines."""

_WORD_LIST = (
    "the of and to in is that for it as was with be by on not he this are or his from at which but have an "
    "they you were her she there one all we their can has more will would been if when so no what up out "
    "said model token cache prefix router engine request prompt server block decode prefill queue latency"
)
WORDS = _WORD_LIST.split()
COMMON_HANZI = (
    "的一是不了在人有我他这个们中来上大为和国地到以说时要就出会可也你对生能而子那得于着下自之年过发后作里"
    "用道行所然家种事成方多经么去法学如都同现当没动面起看定天分还进好小部其些主样理心她本前开但因只从想实日"
)
"""The most frequent Chinese characters, most frequent first (the head of the Zipf ranking)."""
COMMA, ENDINGS = "\uff0c", ("\u3002", "\uff1f", "\uff01", "\uff1b")


@functools.cache
def _zipf() -> tuple[list[str], list[float]]:
    """Level-1 hanzi ranked (:data:`COMMON_HANZI` first, the rest in a seeded shuffle) and the cumulative
    weights of a Zipf law over the ranks (``1 / (rank + 20)``)."""
    head = list(dict.fromkeys(COMMON_HANZI))
    rest = [c for c in gb2312_level1() if c not in set(head)]
    random.Random(SEED).shuffle(rest)
    return head + rest, list(itertools.accumulate(1.0 / (rank + 20) for rank in range(len(head + rest))))


def english(rng: random.Random, words: int) -> str:
    """``words`` words of English-like text (the word list, and some random letter strings)."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    return " ".join(
        rng.choice(WORDS) if rng.random() < 0.85 else "".join(rng.choices(letters, k=rng.randint(2, 7)))
        for _ in range(words)
    )


def chinese(rng: random.Random, chars: int) -> str:
    """About ``chars`` characters of Chinese: Zipf-drawn level-1 hanzi in clauses with Chinese punctuation."""
    ranked, cumulative = _zipf()
    out: list[str] = []
    n = 0
    while n < chars:
        clause = "".join(rng.choices(ranked, cum_weights=cumulative, k=rng.randint(4, 18)))
        out.append(clause + (rng.choice(ENDINGS) if rng.random() < 0.3 else COMMA))
        n += len(clause) + 1
    return "".join(out)


def code(rng: random.Random, lines: int) -> str:
    """``lines`` lines of Python- and C-like code."""
    letters = "abcdefghijklmnopqrstuvwxyz"

    def name() -> str:
        return "_".join(
            rng.choice(WORDS) if rng.random() < 0.6 else "".join(rng.choices(letters, k=rng.randint(1, 5)))
            for _ in range(rng.randint(1, 3))
        )

    shapes = (
        lambda: f"def {name()}(self, {name()}, {name()}={rng.randint(0, 99)}):",
        lambda: f"    return {name()}[{name()}] + {rng.randint(0, 9)}",
        lambda: f"    {name()} = {name()}.{name()}({name()}, {rng.random():.3f})",
        lambda: f"for {name()} in range(len({name()})):",
        lambda: f"        if {name()} == {name()} and not {name()}:",
        lambda: f"int {name()}(const char *{name()}, size_t {name()}) {{",
        lambda: f"    {name()}->{name()} += {rng.randint(1, 64)};  // {name()}",
        lambda: "}",
    )
    return "\n".join(rng.choice(shapes)() for _ in range(lines))


def corpus() -> list[str]:
    """The training text: English, Chinese and code lines and the chat roles, in a fixed order."""
    rng = random.Random(SEED)
    lines = [english(rng, rng.randint(8, 30)) for _ in range(1500)]
    lines += [chinese(rng, rng.randint(10, 60)) for _ in range(3000)]
    lines += [code(rng, 3) for _ in range(500)]
    lines += [f"{role}\n" for role in ("system", "user", "assistant") for _ in range(100)]
    rng.shuffle(lines)
    return lines


def build_tokenizer(directory: Path) -> Path:
    """Train the tokenizer and write ``tokenizer.json`` and ``tokenizer_config.json`` into ``directory``
    (created); returns it. Deterministic for a given ``tokenizers`` version."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(SPLIT_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=list(SPECIAL),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(), trainer=trainer)
    directory.mkdir(parents=True, exist_ok=True)
    tok.save(str(directory / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "added_tokens_decoder": {
            str(tok.token_to_id(t)): {
                "content": t,
                "lstrip": False,
                "normalized": False,
                "rstrip": False,
                "single_word": False,
                "special": True,
            }
            for t in SPECIAL
        },
        "bos_token": None,
        "eos_token": IM_END,
        "pad_token": ENDOFTEXT,
        "additional_special_tokens": [IM_START],
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "model_max_length": 4096,
    }
    (directory / "tokenizer_config.json").write_text(json.dumps(config, ensure_ascii=False, indent=1) + "\n")
    return directory


@pytest.fixture(scope="session")
def tiny_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory of a tokenizer built by :func:`build_tokenizer`, once per session."""
    return build_tokenizer(tmp_path_factory.mktemp("tiny-tokenizer"))


THINKING_TEMPLATE = CHAT_TEMPLATE.replace(
    "'<|im_start|>assistant\\n' }}",
    "'<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}"
    "{%- endif %}"
    "{%- if reasoning_effort is defined %}{{- 'effort: ' + reasoning_effort + '\\n' }}{%- endif %}",
)
"""ChatML as a thinking model's (Qwen3's ``enable_thinking``, gpt-oss-like ``reasoning_effort``): a
generation prompt with thinking off writes an empty think block; with ``reasoning_effort`` defined, a line
naming it."""


def thinking_model(directory: Path, tokenizer: Path) -> Path:
    """A copy of ``tokenizer``'s directory whose chat template is :data:`THINKING_TEMPLATE`."""
    shutil.copytree(tokenizer, directory)
    (directory / "chat_template.jinja").write_text(THINKING_TEMPLATE)
    return directory
