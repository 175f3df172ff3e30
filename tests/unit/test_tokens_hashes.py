"""infctl.tokens: the fast paths give exactly what the convention's plain definition gives.

The simulated engines, their KV events, the router's indexes and the oracle all compare these ids and hashes,
so "the same" means equal, bit for bit, memoised or not.
"""

from __future__ import annotations

import hashlib
import struct
import zlib

from hypothesis import given, settings
from hypothesis import strategies as st

from infctl import tokens
from infctl.sim.kvcache import chain_hash, root_hash


def reference_ids(text: str) -> list[int]:
    return [zlib.crc32(w.encode("utf-8", "surrogatepass")) for w in text.split()]


def reference_hashes(ids: list[int], block_size: int, seed: str) -> list[int]:
    parent = int.from_bytes(hashlib.blake2b(seed.encode(), digest_size=8).digest(), "little")
    out = []
    for b in range(len(ids) // block_size):
        chunk = ids[b * block_size : (b + 1) * block_size]
        packed = struct.pack(f"<Q{block_size}I", parent, *chunk)
        parent = int.from_bytes(hashlib.blake2b(packed, digest_size=8).digest(), "little")
        out.append(parent)
    return out


# ASCII words with every kind of separator str.split() knows, including the ones bytes.split() does not.
_SEPARATORS = st.sampled_from(
    [" ", "  ", "\t", "\n", "\r\n", "\x0b", "\x0c", "\x1c", "\x1f", "\xa0", "\u3000"]
)
_WORDS = st.text(st.characters(blacklist_categories=("Zs", "Cc", "Zl", "Zp")), min_size=1, max_size=6)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_WORDS, _SEPARATORS), max_size=40), st.booleans())
def test_token_ids_match_the_word_definition(parts: list[tuple[str, str]], ascii_only: bool) -> None:
    text = "".join(w + s for w, s in parts)
    if ascii_only:
        text = text.encode("ascii", "ignore").decode()
    assert tokens.token_ids(text) == reference_ids(text)


# Every ASCII character (controls and the separators 0x1c-0x1f included) and some non-ASCII whitespace, words
# and a lone surrogate: the ASCII fast path (bytes split) and the str path must both equal the definition.
_ANY_CHAR = st.sampled_from([chr(c) for c in range(128)] + ["\x85", "\xa0", "\u2003", "é", "漢", "\ud800"])


@settings(max_examples=400, deadline=None)
@given(st.text(_ANY_CHAR, max_size=120))
def test_token_ids_match_the_word_definition_on_any_characters(text: str) -> None:
    assert tokens.token_ids(text) == reference_ids(text)
    ascii_text = text.encode("ascii", "ignore").decode()
    assert tokens.token_ids(ascii_text) == reference_ids(ascii_text)


def test_token_ids_split_on_each_separator_str_split_knows() -> None:
    for c in map(chr, range(128)):
        for text in (c, f"ab{c}cd", f"{c}{c}x{c}"):
            assert tokens.token_ids(text) == reference_ids(text), repr(text)
    assert len(tokens.token_ids("a\x1cb\x1dc\x1ed\x1fe")) == 5  # str.split's separators, not bytes.split's


@settings(max_examples=150, deadline=None)
@given(
    ids=st.lists(st.integers(0, 2**32 - 1), max_size=700),
    block_size=st.sampled_from([1, 3, 16, 32]),
    seed=st.sampled_from(["", "m", "llama3-8b"]),
)
def test_block_hashes_match_the_chain_definition(ids: list[int], block_size: int, seed: str) -> None:
    want = reference_hashes(ids, block_size, seed)
    assert tokens.block_hashes(ids, block_size, seed) == want
    assert tokens.block_hashes(ids, block_size, seed) == want  # second time from the memo


def test_memoised_runs_are_shared_across_prompts_but_results_are_not() -> None:
    prefix = tokens.token_ids(tokens.synth_words(16 * tokens.MEMO_BLOCKS * 3, 5))
    a = prefix + tokens.token_ids(tokens.synth_words(100, 6))
    b = prefix + tokens.token_ids(tokens.synth_words(100, 7))
    ha, hb = tokens.block_hashes(a, 16, "m"), tokens.block_hashes(b, 16, "m")
    n = len(prefix) // 16
    assert ha[:n] == hb[:n] and ha[n:] != hb[n:]
    assert (ha, hb) == (reference_hashes(a, 16, "m"), reference_hashes(b, 16, "m"))
    ha.append(1)  # callers may extend what they get (the simulator does)
    assert tokens.block_hashes(a, 16, "m") == reference_hashes(a, 16, "m")


def test_same_ids_under_another_seed_or_block_size_hash_differently() -> None:
    ids = list(range(16 * tokens.MEMO_BLOCKS * 2))
    tokens.block_hashes(ids, 16, "m")
    assert tokens.block_hashes(ids, 16, "other") == reference_hashes(ids, 16, "other")
    assert tokens.block_hashes(ids, 8, "m") == reference_hashes(ids, 8, "m")


def test_the_simulators_incremental_chain_agrees() -> None:
    ids = tokens.token_ids(tokens.synth_words(16 * 40 + 5, 9))
    hashes = tokens.block_hashes(ids, 16, "m")
    parent = root_hash("m")
    for i, h in enumerate(hashes):
        parent = chain_hash(parent, ids[i * 16 : (i + 1) * 16])
        assert parent == h


def test_the_memo_stays_within_its_byte_bound() -> None:
    memo: tokens.Memo[bytes, int] = tokens.Memo(max_bytes=20_000)
    for i in range(200):
        key = i.to_bytes(8, "little") + bytes(1024)
        memo.put(key, i, 1500)
        assert memo.bytes <= 20_000
    assert memo.get((199).to_bytes(8, "little") + bytes(1024)) == 199
    assert memo.get((0).to_bytes(8, "little") + bytes(1024)) is None  # least recently used went first


def _long_text(words: int, salt: int, sep: str = " ") -> str:
    return sep.join(tokens.synth_words(words, salt).split())


def test_long_prompts_sharing_a_prefix_get_the_same_ids_as_unmemoised() -> None:
    prefix = _long_text(3000, 11)  # ~20k characters: several chunks
    assert len(prefix) > 4 * tokens.TEXT_CHUNK
    texts = [f"{prefix} {_long_text(n, 12 + n)}" for n in (1, 64, 700)]
    texts += [
        prefix + "x",
        prefix[: len(prefix) // 2],
        "\x1c".join([prefix, prefix]),
        prefix.replace(" ", "\n"),
    ]
    texts += [f"{prefix}\xa0é漢\u3000{prefix}\ud800 tail", " " * 5000 + prefix + " " * 5000]
    for _ in range(2):  # the second time from the memo
        for text in texts:
            assert tokens.token_ids(text) == reference_ids(text)
    got = tokens.token_ids(texts[0])
    got.append(1)  # callers may extend what they get
    assert tokens.token_ids(texts[0]) == reference_ids(texts[0])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(_WORDS, _SEPARATORS), min_size=1, max_size=30), st.integers(0, 3))
def test_long_prompts_match_the_word_definition(parts: list[tuple[str, str]], shift: int) -> None:
    # Repeated past 2 * TEXT_CHUNK characters with the chunk cuts landing anywhere, memo hits included.
    unit = "".join(w + s for w, s in parts)
    text = " " * shift + unit * (2 * tokens.TEXT_CHUNK // len(unit) + 2)
    assert tokens.token_ids(text) == reference_ids(text)
    assert tokens.token_ids(text[1:]) == reference_ids(text[1:])


def test_only_chunks_seen_twice_take_memo_space() -> None:
    text = _long_text(3000, 21)
    before = tokens._TEXT_MEMO.bytes
    tokens.token_ids(text)
    assert tokens._TEXT_MEMO.bytes == before  # a prompt seen once costs the memo nothing
    tokens.token_ids(text)
    assert tokens._TEXT_MEMO.bytes > before
    assert tokens.token_ids(text) == reference_ids(text)


def test_a_recurring_prefix_is_learnt_whole_in_a_few_returns() -> None:
    prefix = _long_text(4000, 31)  # ~13 chunks
    before = tokens._TEXT_MEMO.bytes
    for i in range(6):  # 1, 2, 4, 8 chunks noted: all of it by the fifth
        text = f"{prefix} {_long_text(50, 40 + i)}"
        assert tokens.token_ids(text) == reference_ids(text)
    assert tokens._TEXT_MEMO.bytes - before > len(prefix) * 0.9  # all but the chunk cut into the suffix
