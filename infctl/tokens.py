"""The deterministic token convention shared by the simulated engine, the benchmark and the router.

Real engines tokenize with a model's tokenizer; the simulator cannot, so it uses a convention that any
client can reproduce exactly:

* **A token is a whitespace-separated word.** ``count_tokens("a b  c") == 3``. A benchmark that wants a
  prompt of N tokens writes N words.
* **A token's id** is the CRC-32 of the word's UTF-8 bytes, so equal words give equal ids everywhere.
* **Chat prompts** are rendered as, per message, one marker token ``<|role|>`` followed by the content's
  words, and one trailing ``<|assistant|>`` marker: ``sum(1 + words(content)) + 1`` tokens.
* **Generated text** is one word per token, each streamed with a leading space, so the completion text
  re-tokenizes to exactly ``completion_tokens``.
* **Block hashes** chain: ``h_i = H(h_{i-1}, ids of block i)`` over full blocks only, seeded with a string
  (the model name by convention), as vLLM's prefix cache and llm-d's prefix index do. Equal hashes mean
  equal prefixes, which is what prefix caching and prefix-aware routing rely on.
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from collections.abc import Iterable, Mapping, Sequence

_WORDS = (
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "that",
    "for",
    "it",
    "as",
    "was",
    "with",
    "be",
    "by",
    "on",
    "not",
    "he",
    "this",
    "are",
    "or",
    "his",
    "from",
    "at",
    "which",
    "but",
    "have",
    "an",
    "they",
    "you",
    "were",
    "her",
    "she",
    "there",
    "one",
    "all",
    "we",
    "their",
    "can",
    "has",
    "more",
    "will",
    "would",
    "been",
    "if",
    "when",
    "so",
    "no",
    "what",
    "up",
    "out",
    "said",
)  # fmt: skip


def token_ids(text: str) -> list[int]:
    """Token ids of ``text`` under the convention above."""
    return [zlib.crc32(w.encode()) for w in text.split()]


def count_tokens(text: str) -> int:
    return len(text.split())


def chat_prompt_text(messages: Iterable[Mapping[str, object]]) -> str:
    """Render chat messages to the prompt text whose tokens the engine sees."""
    parts: list[str] = []
    for m in messages:
        parts.append(f"<|{m.get('role', 'user')}|>")
        parts.append(_content_text(m.get("content")))
    parts.append("<|assistant|>")
    return " ".join(p for p in parts if p)


def _content_text(content: object) -> str:
    # OpenAI content may be a string or a list of parts; only text parts carry tokens here.
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def output_word(seed: int, index: int) -> str:
    """The ``index``-th generated word for a request seeded with ``seed`` (deterministic)."""
    return _WORDS[(seed * 31 + index * 7) % len(_WORDS)]


def synth_words(n: int, salt: int = 0) -> str:
    """N words of filler text; different salts give different (non-shared) token sequences."""
    return " ".join(f"{_WORDS[(i * 13 + salt) % len(_WORDS)]}{salt}" for i in range(n))


_PACK_CACHE: dict[int, struct.Struct] = {}


def block_hashes(ids: Sequence[int], block_size: int, seed: str = "") -> list[int]:
    """Chained 64-bit hashes of each *full* block of ``ids`` (a trailing partial block has none)."""
    n_full = len(ids) // block_size
    if n_full == 0:
        return []
    packer = _PACK_CACHE.get(block_size)
    if packer is None:
        packer = _PACK_CACHE.setdefault(block_size, struct.Struct(f"<Q{block_size}I"))
    parent = int.from_bytes(hashlib.blake2b(seed.encode(), digest_size=8).digest(), "little")
    out: list[int] = []
    for b in range(n_full):
        chunk = ids[b * block_size : (b + 1) * block_size]
        digest = hashlib.blake2b(packer.pack(parent, *chunk), digest_size=8).digest()
        parent = int.from_bytes(digest, "little")
        out.append(parent)
    return out
