"""Build a tiny random Llama and a small BPE tokenizer that a real vLLM (CPU build) can serve.

    python tools/make_tiny_model.py OUT_DIR [--seed 0]

Run it with an interpreter that has ``torch``, ``transformers`` and ``tokenizers`` (the vLLM venv that
``.ci/slow`` creates). Nothing is downloaded: the weights are random and the tokenizer is trained here on
synthetic text. The output is deterministic for a given seed and library versions, so a second run over an
existing directory with the same fingerprint does nothing.

Shape (REFERENCE.md section 7): hidden 256, 4 attention heads of 64 dims (the CPU attention kernels reject
head_dim 16), 2 KV heads, 2 layers, 4,096 positions.

The tokenizer is a byte-level BPE of 4,096 tokens over the full byte alphabet (any UTF-8 text encodes; there
is no unknown token), pre-tokenized and templated like Qwen2's, trained here on synthetic text:

- English made of ``infctl.tokens``' word list, so every such word is exactly one token with its leading
  space and without it: a completion prompt of N words from that list is N prompt tokens on the real engine
  too, which is what the simulator and the benchmark's word prompts assume. No BOS token is added.
- Chinese drawn from GB2312's 3,755 level-1 hanzi with a Zipf law (the most frequent first): about 2,500 of
  them are one token each, the rest two byte tokens, and characters outside them two or three: 600
  characters drawn evenly from level 1 are ~800 tokens, as real multilingual tokenizers give about one token
  per character, never a handful of "words".
- Code-like lines (identifiers, indentation, operators), and the chat roles.

The chat template is ChatML (:data:`CHAT_TEMPLATE`), with ``<|im_start|>``/``<|im_end|>`` as special tokens.
``transformers`` 5 saves it as ``chat_template.jinja`` beside ``tokenizer_config.json`` (which no longer
holds it), and vLLM reads it from there.

A random model emits any token, byte tokens included: its text may hold U+FFFD, and a streamed chunk ending in
the middle of a character carries empty text (vLLM holds the bytes back); count tokens by ``token_ids`` or
``usage``, not by chunks' text.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
from pathlib import Path

# infctl.tokens is plain Python (no dependencies), so the engine's venv can import it from this checkout.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from infctl.tokens import _WORDS as WORDS
from infctl.tokens import gb2312_level1

HIDDEN = 256
HEADS = 4
KV_HEADS = 2
LAYERS = 2
INTERMEDIATE = 512
MAX_POSITIONS = 4096
VOCAB = 4096
ENDOFTEXT, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
SPECIAL = (ENDOFTEXT, IM_START, IM_END)
"""Ids 0, 1, 2. As in Qwen2's tokenizer: no BOS, ``<|im_end|>`` ends a chat turn (the EOS), ``<|endoftext|>``
pads."""
FINGERPRINT_FILE = "infctl-tiny-model.json"
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
"""ChatML, as Qwen's models use (without their default system prompt and tools): each message is
``<|im_start|>{role}\n{content}<|im_end|>\n``, and ``add_generation_prompt`` (vLLM's default for
/v1/chat/completions and /tokenize with ``messages``) appends ``<|im_start|>assistant\n``. So a chat prompt
carries template tokens as real models' do: 5 per message (``<|im_start|>``, the role, ``\n``, ``<|im_end|>``,
``\n``) plus 3."""
SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
"""Qwen2's (and GPT-4's, but for single digits) pre-tokenizer: words with their leading space, digits one by
one, punctuation runs, newlines. A run of CJK characters is one piece, which the merges then split."""
COMMON_HANZI = (
    "的一是不了在人有我他这个们中来上大为和国地到以说时要就出会可也你对生能而子那得于着下自之年过发后作里"
    "用道行所然家种事成方多经么去法学如都同现当没动面起看定天分还进好小部其些主样理心她本前开但因只从想实日"
)
"""The most frequent Chinese characters, most frequent first: the head of the synthetic Chinese text's
frequency ranking (the rest of GB2312's level 1 follows in a fixed pseudo-random order)."""


COMMA, ENDINGS = "\uff0c", ("\u3002", "\uff1f", "\uff01", "\uff1b")
"""Chinese punctuation: the full-width comma; the full stop, question mark, exclamation mark, semicolon."""


def hanzi_by_frequency(seed: int) -> list[str]:
    """Level-1 hanzi ranked: :data:`COMMON_HANZI` first, the rest in a seeded shuffle."""
    head = list(dict.fromkeys(COMMON_HANZI))
    rest = [c for c in gb2312_level1() if c not in set(head)]
    random.Random(seed).shuffle(rest)
    return head + rest


def english_lines(rng: random.Random, lines: int) -> list[str]:
    """Lines of the shared words plus random letter strings (so BPE also learns sub-word merges); every line
    starts with a bare word, so each word is one token without its leading space too (a prompt's first)."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    out = []
    for _ in range(lines):
        words = [
            rng.choice(WORDS) if rng.random() < 0.8 else "".join(rng.choices(letters, k=rng.randint(2, 7)))
            for _ in range(rng.randint(8, 40))
        ]
        out.append(" ".join(words) + rng.choice(("", ".", ",", "?", "!")))
    return out


def chinese_lines(rng: random.Random, lines: int, seed: int) -> list[str]:
    """Sentences drawn from a Zipf law over the ranked hanzi (weight 1 / (rank + 20)), with Chinese
    punctuation: the common characters merge into one token each, the rare ones stay 2-3 byte tokens."""
    ranked = hanzi_by_frequency(seed)
    weights = [1.0 / (rank + 20) for rank in range(len(ranked))]
    out = []
    for _ in range(lines):
        clauses = [
            "".join(rng.choices(ranked, weights, k=rng.randint(4, 18))) for _ in range(rng.randint(1, 4))
        ]
        out.append(COMMA.join(clauses) + rng.choice(ENDINGS))
    return out


def code_lines(rng: random.Random, lines: int) -> list[str]:
    """Python- and C-like lines: identifiers from the word list, indentation, operators and brackets."""
    letters = "abcdefghijklmnopqrstuvwxyz"

    def name() -> str:
        parts = [
            rng.choice(WORDS) if rng.random() < 0.6 else "".join(rng.choices(letters, k=rng.randint(1, 5)))
            for _ in range(rng.randint(1, 3))
        ]
        return "_".join(parts)

    shapes = (
        lambda: f"def {name()}(self, {name()}, {name()}={rng.randint(0, 99)}):",
        lambda: f"    return {name()}[{name()}] + {rng.randint(0, 9)}",
        lambda: f"    {name()} = {name()}.{name()}({name()}, {rng.random():.3f})",
        lambda: f"for {name()} in range(len({name()})):",
        lambda: f"        if {name()} == {name()} and not {name()}:",
        lambda: f'    {name()} = {{"{name()}": {rng.randint(0, 999)}, "{name()}": None}}',
        lambda: f"int {name()}(const char *{name()}, size_t {name()}) {{",
        lambda: f"    {name()}->{name()} += {rng.randint(1, 64)};  // {name()}",
        lambda: "}",
        lambda: f"# {name()}: {' '.join(rng.choices(WORDS, k=rng.randint(3, 9)))}",
    )
    return [rng.choice(shapes)() for _ in range(lines)]


def synthetic_corpus(seed: int) -> list[str]:
    """English, Chinese and code, and the chat turns' role lines (the template's text between its special
    tokens), in a fixed shuffled order."""
    rng = random.Random(seed)
    roles = [f"{role}\n" for role in ("system", "user", "assistant") for _ in range(200)]
    corpus = english_lines(rng, 4000) + chinese_lines(rng, 12000, seed) + code_lines(rng, 3000) + roles
    rng.shuffle(corpus)
    return corpus


def build_tokenizer(seed: int):  # type: ignore[no-untyped-def]
    """Byte-level BPE over the full byte alphabet, so any UTF-8 text encodes (no unknown token)."""
    from tokenizers import (
        Regex,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
        trainers,
    )

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(SPLIT_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=list(SPECIAL),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(synthetic_corpus(seed), trainer=trainer)
    check_tokenizer(tok)
    return tok


def check_tokenizer(tok) -> None:  # type: ignore[no-untyped-def]
    """What the tests and the simulator's convention rely on; a build that breaks it fails here."""
    long_words = [w for w in WORDS for text in (w, " " + w) if len(tok.encode(text).ids) != 1]
    if long_words:
        raise SystemExit(f"make_tiny_model: words not one token each: {sorted(set(long_words))}")
    sample = "naïve 🦀 ☃ 中文 日本語 한국어 \x00\t"
    if tok.decode(tok.encode(sample).ids) != sample:
        raise SystemExit("make_tiny_model: byte-level round trip failed")


def fingerprint(seed: int) -> dict[str, object]:
    import tokenizers
    import torch
    import transformers

    return {
        "seed": seed,
        "shape": [HIDDEN, HEADS, KV_HEADS, LAYERS, INTERMEDIATE, MAX_POSITIONS, VOCAB],
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
        "script": hashlib.sha256(Path(__file__).read_bytes()).hexdigest(),
    }


def build(out: Path, seed: int) -> bool:
    """Write the model to ``out``; False when an identical build is already there."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    stamp = fingerprint(seed)
    marker = out / FINGERPRINT_FILE
    if marker.exists() and json.loads(marker.read_text()) == stamp:
        return False
    out.mkdir(parents=True, exist_ok=True)
    raw = build_tokenizer(seed)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=raw, eos_token=IM_END, pad_token=ENDOFTEXT, additional_special_tokens=[IM_START]
    )
    tokenizer.model_max_length = MAX_POSITIONS
    tokenizer.chat_template = CHAT_TEMPLATE
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=HIDDEN,
        intermediate_size=INTERMEDIATE,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        max_position_embeddings=MAX_POSITIONS,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    marker.write_text(json.dumps(stamp, indent=1) + "\n")
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="directory to write (created)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    built = build(args.out, args.seed)
    print(f"{'built' if built else 'up to date'}: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
