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

import functools
import hashlib
import struct
import sys
import threading
import zlib
from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import AnyStr, Generic, TypeVar

_K = TypeVar("_K")
_V = TypeVar("_V")

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
    """Token ids of ``text`` under the convention above. JSON may carry lone surrogates (``"\\ud800"``),
    which strict UTF-8 refuses: they are encoded as they stand (``surrogatepass``), which leaves every
    other word's bytes, and so its id, unchanged.

    A prompt of ``2 * TEXT_CHUNK`` characters or more is cut at the first space after every ``TEXT_CHUNK``
    characters (no word spans a space, so the ids are the chunks' ids end to end) and a chunk seen twice
    has its ids memoised by its text: a long prefix shared by many prompts (a system prompt, a document,
    a conversation's history) is looked up instead of tokenised. Returns a new list every call."""
    if len(text) < 2 * TEXT_CHUNK:
        return _ids(text)
    if text.isascii():
        return _chunked_ids(text.encode().translate(_SEPARATORS_TO_SPACE), b" ", _bytes_ids)
    return _chunked_ids(text, " ", _str_ids)


def _chunked_ids(data: AnyStr, space: AnyStr, ids: Callable[[AnyStr], list[int]]) -> list[int]:
    # Prompts share prefixes, and past the point where two prompts differ their chunks are cut at other
    # places: so the first chunk never seen before ends the lookups and the rest is tokenised in one go
    # (a prompt nobody sent before costs one lookup more than no memo). A chunk is memoised the second
    # time it is seen, so text that never recurs takes no memo space. After k chunks found (or admitted)
    # the next k + 1 are noted as seen: a recurring prefix is learnt twice as far each time it returns.
    memo = _TEXT_MEMO
    out: list[int] = []
    pos = found = 0
    while True:
        end = data.find(space, pos + TEXT_CHUNK)
        if end < 0:
            break
        chunk = data[pos:end]
        hit = memo.get(chunk)
        if hit is None:
            if not memo.seen_before(chunk):
                _note_chunks(data, space, end, found + 1)
                break
            hit = array("I", ids(chunk))
            memo.put(chunk, hit, sys.getsizeof(chunk) + 4 * len(hit) + 200)
        out.extend(hit)
        pos, found = end, found + 1
    out.extend(ids(data[pos:]))
    return out


def _note_chunks(data: AnyStr, space: AnyStr, pos: int, count: int) -> None:
    """Note up to ``count`` chunks from ``pos`` as seen, so they are memoised when they come back."""
    for _ in range(count):
        end = data.find(space, pos + TEXT_CHUNK)
        if end < 0:
            return
        _TEXT_MEMO.seen_before(data[pos:end])
        pos = end


def _ids(text: str) -> list[int]:
    """ASCII text is encoded once and split as bytes (after mapping the separators 0x1c-0x1f, which
    ``str.split`` splits on and ``bytes.split`` does not, to spaces): the same ids, 1.7x cheaper than a
    ``str.split`` and an encode per word. Other text splits as ``str`` (its Unicode whitespace is not one
    byte)."""
    if text.isascii():
        return _bytes_ids(text.encode().translate(_SEPARATORS_TO_SPACE))
    return _str_ids(text)


def _bytes_ids(data: bytes) -> list[int]:
    """Ids of ASCII text already encoded, its separators 0x1c-0x1f mapped to spaces."""
    return list(map(zlib.crc32, data.split()))


def _str_ids(text: str) -> list[int]:
    return [zlib.crc32(w.encode("utf-8", "surrogatepass")) for w in text.split()]


_SEPARATORS_TO_SPACE = bytes.maketrans(b"\x1c\x1d\x1e\x1f", b"    ")
"""The four ASCII separators ``str.split`` treats as whitespace and ``bytes.split`` does not, as spaces."""

TEXT_CHUNK = 2048
"""Characters per memoised chunk of ``token_ids`` (cut at the next space)."""


def count_tokens(text: str) -> int:
    """``len(text.split())`` without building the words: 2.7x cheaper on 512-4096-word ASCII prompts,
    4.6x on 32k words (1.18 ms -> 0.26 ms; ``benchmarks/bench_token_count.py``), the same on other text.
    ASCII text is mapped to two bytes, word (``x``) and whitespace (`` ``, every character ``str.split``
    splits on), and a word starts at each ``" x"``; other text falls back to ``str.split`` (its Unicode
    whitespace is not one byte)."""
    if not text.isascii():
        return len(text.split())
    marks = text.encode().translate(_WORD_MARKS)
    return marks.count(b" x") + (marks[:1] == b"x")


_WORD_MARKS = bytes(ord(" ") if chr(c).isspace() else ord("x") for c in range(256))
"""Byte -> ``" "`` where ``str.split`` would split (ASCII whitespace and the separators 0x1c-0x1f), else
``"x"``; used on ASCII text only."""


def chat_prompt_text(messages: Iterable[Mapping[str, object]], *, generation_prompt: bool = True) -> str:
    """Render chat messages to the prompt text whose tokens the engine sees. ``generation_prompt`` False
    leaves off the closing assistant marker (a template's ``add_generation_prompt``; a request that
    continues its final assistant message, ``continue_final_message``, has none either)."""
    parts: list[str] = []
    for m in messages:
        parts.append(f"<|{m.get('role', 'user')}|>")
        parts.append(_content_text(m.get("content")))
    if generation_prompt:
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


def gb2312_level1() -> list[str]:
    """GB2312's 3,755 level-1 hanzi (the common ones), decoded from the codec: no data file needed. The
    Chinese text of the benchmark, the tests' tokenizer and the tiny model's tokenizer is drawn from it."""
    chars = []
    for hi in range(0xB0, 0xD8):
        for lo in range(0xA1, 0xFF):
            try:
                chars.append(bytes([hi, lo]).decode("gb2312"))
            except UnicodeDecodeError:  # 0xD7FA-0xD7FE are unassigned
                continue
    return chars


def synth_words(n: int, salt: int = 0) -> str:
    """N words of filler text; different salts give different (non-shared) token sequences."""
    return " ".join(f"{_WORDS[(i * 13 + salt) % len(_WORDS)]}{salt}" for i in range(n))


def block_hashes(ids: Sequence[int], block_size: int, seed: str = "") -> list[int]:
    """Chained 64-bit hashes of each *full* block of ``ids`` (a trailing partial block has none).

    Block ``i`` hashes ``h_{i-1}`` (u64) then its ids (u32 each), little-endian, with BLAKE2b-64. Runs of
    ``MEMO_BLOCKS`` blocks are memoised by (their parent hash, their ids), so a long prefix shared by many
    prompts (a system prompt, a conversation's history) is hashed once. Returns a new list every call
    (``infctl.lazy_chain.LazyChain``: the same values, hashed as they are read).
    """
    n_full = len(ids) // block_size
    if n_full == 0:
        return []
    step = 4 * block_size
    buf = struct.pack(f"<{n_full * block_size}I", *ids[: n_full * block_size])
    parent = _root_digest(seed)
    out: list[int] = []
    run = step * MEMO_BLOCKS
    pos = 0
    while pos < len(buf):
        end = min(len(buf), pos + run)
        hashes, parent = chain_run(parent, buf[pos:end], block_size, memo=end - pos == run)
        out.extend(hashes)
        pos = end
    return out


def chain_run(
    parent: bytes, buf: bytes, block_size: int, *, memo: bool = True
) -> tuple[tuple[int, ...], bytes]:
    """Hashes of the blocks packed in ``buf`` (u32 ids) chained after the digest ``parent``, and the last
    digest; remembered (``memo``: a full run of ``MEMO_BLOCKS``) by the parent and the ids."""
    step = 4 * block_size
    if not memo:
        return _chain(parent, buf, step)
    key = (block_size, parent + buf)
    hit = _MEMO.get(key)
    if hit is None:
        hit = _chain(parent, buf, step)
        _MEMO.put(key, hit, len(key[1]) + 40 * len(hit[0]) + 200)
    return hit


MEMO_BLOCKS = 16
"""Blocks per memoised run of ``block_hashes``."""


def _chain(parent: bytes, buf: bytes, step: int) -> tuple[tuple[int, ...], bytes]:
    """Hashes of the blocks of ``step`` bytes in ``buf`` after ``parent`` (a digest), and the last digest."""
    b2, as_int = hashlib.blake2b, int.from_bytes
    out: list[int] = []
    for pos in range(0, len(buf), step):
        parent = b2(parent + buf[pos : pos + step], digest_size=8).digest()
        out.append(as_int(parent, "little"))
    return tuple(out), parent


@functools.lru_cache(maxsize=64)
def _root_digest(seed: str) -> bytes:
    return hashlib.blake2b(seed.encode(), digest_size=8).digest()


def root_digest(seed: str) -> bytes:
    """The digest a chain of ``block_hashes`` seeded with ``seed`` starts from."""
    return _root_digest(seed)


def extend_chain(parent: bytes, ids: Sequence[int], block_size: int) -> tuple[tuple[int, ...], bytes]:
    """Hashes of the full blocks of ``ids`` chained after the digest ``parent``, and the last digest:
    ``block_hashes`` continued from a known block (ids past the last full block are ignored)."""
    n_full = len(ids) // block_size
    if n_full == 0:
        return (), parent
    buf = struct.pack(f"<{n_full * block_size}I", *ids[: n_full * block_size])
    return _chain(parent, buf, 4 * block_size)


class Memo(Generic[_K, _V]):
    """LRU bounded in (approximate) bytes, each entry's size given by the caller; thread-safe (the simulator
    uses threads)."""

    def __init__(self, max_bytes: int, max_seen: int = 8192) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._entries: OrderedDict[_K, tuple[_V, int]] = OrderedDict()
        self._lock = threading.Lock()
        self._seen: set[int] = set()
        self._max_seen = max_seen

    def seen_before(self, key: _K) -> bool:
        """Whether ``key`` was asked about before (forgotten every ``max_seen`` distinct keys), noting it:
        lets a caller store only what recurs. Remembers hashes, not keys; a collision only admits early."""
        h = hash(key)
        with self._lock:
            if h in self._seen:
                return True
            if len(self._seen) >= self._max_seen:
                self._seen.clear()
            self._seen.add(h)
            return False

    def get(self, key: _K) -> _V | None:
        with self._lock:
            hit = self._entries.get(key)
            if hit is None:
                return None
            self._entries.move_to_end(key)
            return hit[0]

    def put(self, key: _K, value: _V, size: int) -> None:
        with self._lock:
            if key in self._entries:
                return
            self._entries[key] = (value, size)
            self.bytes += size
            while self.bytes > self.max_bytes and self._entries:
                self.bytes -= self._entries.popitem(last=False)[1][1]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._seen.clear()
            self.bytes = 0


MEMO_BYTES = 32 << 20
"""Memory bound of the ``block_hashes`` memo (bytes, approximate)."""
_MEMO: Memo[tuple[int, bytes], tuple[tuple[int, ...], bytes]] = Memo(MEMO_BYTES)

TEXT_MEMO_BYTES = 16 << 20
"""Memory bound of the ``token_ids`` chunk memo (bytes, approximate: a chunk's text + 40 per id)."""
_TEXT_MEMO: Memo[str | bytes, array[int]] = Memo(TEXT_MEMO_BYTES)
