"""Cost of counting a prompt's tokens (``infctl.tokens.count_tokens``) against ``len(text.split())``, and of
its token ids (``infctl.tokens.token_ids``) against the convention's plain definition (split, encode and
CRC-32 each word), side by side in one run, on prompts of the router's sizes. Pure CPU; prints per-call
microseconds and the ratios, then what ``request_info`` (count only, and with block hashes) costs on a
prompt at the default ``max_prompt_chars``: the longest the event loop can be held by one request's prompt.

    python benchmarks/bench_token_count.py [--words 32768] [--repeat 200]
"""

from __future__ import annotations

import argparse
import itertools
import random
import time
import zlib
from collections.abc import Callable
from typing import Any

from infctl.router.config import RouterConfig
from infctl.router.requests import request_info
from infctl.tokens import block_hashes, chat_prompt_text, count_tokens, synth_words, token_ids


def _per_call_us(fn: Callable[[str], Any], text: str, repeat: int) -> float:
    best = float("inf")
    for _ in range(5):  # best of five rounds: the least disturbed by other processes on the machine
        start = time.perf_counter()
        for _ in range(repeat):
            fn(text)
        best = min(best, (time.perf_counter() - start) / repeat)
    return best * 1e6


def split_ids(text: str) -> list[int]:
    """The convention's plain definition of ``token_ids``."""
    return [zlib.crc32(w.encode("utf-8", "surrogatepass")) for w in text.split()]


def _per_prompt_us(fn: Callable[[str], Any], rounds: list[list[str]]) -> float:
    """Best of the rounds' mean per prompt; each round its own prompts (a memo sees only what it would)."""
    best = float("inf")
    for texts in rounds:
        start = time.perf_counter()
        for t in texts:
            fn(t)
        best = min(best, (time.perf_counter() - start) / len(texts))
    return best * 1e6


def _random_words(n: int, salt: int) -> str:
    """``n`` words drawn at random (``synth_words`` and bench_router's text repeat with a short period, which
    a chunk memo would find inside one prompt; real prompts do not)."""
    rng = random.Random(salt)
    return " ".join(f"{w}{salt}" for w in rng.choices(_VOCAB, k=n))


_VOCAB = tuple(synth_words(51).split())


def _token_ids_table(sizes: list[int], repeat: int) -> None:
    """``token_ids`` (and with block hashes, as ``request_info`` does) against the plain definition, on
    prompts all distinct (its chunk memo only misses) and on bench_router's shared-prefix shape (48
    prefixes of N words, each prompt with 64 words of its own; the memo warm after the first round).
    Every measurement gets prompts of its own, so no one warms the memo for another."""
    n_prompts = max(10, repeat // 4)
    salts = itertools.count(1000)
    print(f"\n{'token ids of':>36} {'split us':>10} {'ids us':>10} {'ratio':>7} {'+hashes':>9} {'ratio':>7}")
    for n in sizes:
        prefixes = [_random_words(n, 100 + g) for g in range(48)]

        def unique(n: int = n) -> list[list[str]]:
            return [[_random_words(n, next(salts)) for _ in range(n_prompts)] for _ in range(5)]

        def shared(prefixes: list[str] = prefixes) -> list[list[str]]:
            return [
                [f"{prefixes[i % 48]} {_random_words(64, next(salts))}" for i in range(n_prompts)]
                for _ in range(5)
            ]

        for name, make in ((f"{n} words, all distinct", unique), (f"{n} words + 64, 48 prefixes", shared)):
            check = make()[0]
            assert [token_ids(t) for t in check] == [split_ids(t) for t in check]
            old, new = _per_prompt_us(split_ids, make()), _per_prompt_us(token_ids, make())
            old_h = _per_prompt_us(lambda t: block_hashes(split_ids(t), 16, "m"), make())
            new_h = _per_prompt_us(lambda t: block_hashes(token_ids(t), 16, "m"), make())
            print(f"{name:>36} {old:10.1f} {new:10.1f} {old / new:6.1f}x {new_h:9.1f} {old_h / new_h:6.1f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--words", type=int, nargs="+", default=[512, 4096, 32768])
    ap.add_argument("--repeat", type=int, default=200)
    args = ap.parse_args()

    def split_count(text: str) -> int:
        return len(text.split())

    print(f"{'prompt':>28} {'split us':>10} {'count us':>10} {'ratio':>7}")
    for n in args.words:
        words = synth_words(n, 1)
        chat = chat_prompt_text(
            [{"role": "system", "content": "Answer briefly.\n\n"}, {"role": "user", "content": words}]
        )
        for name, text in (
            (f"{n} words", words),
            (f"{n} words, chat", chat),
            (f"{n} words, non-ASCII", words + " é"),
        ):
            assert count_tokens(text) == split_count(text)
            old, new = (
                _per_call_us(split_count, text, args.repeat),
                _per_call_us(count_tokens, text, args.repeat),
            )
            print(f"{name:>28} {old:10.1f} {new:10.1f} {old / new:6.1f}x")
    _token_ids_table(args.words, args.repeat)

    limit = RouterConfig(backends=()).max_prompt_chars
    text = synth_words(limit // 3, 2)[:limit]  # words of 3-6 characters with their spaces, cut at the bound
    body = {"model": "m", "prompt": text}
    for hashes in (False, True):
        start = time.perf_counter()
        request_info(
            body, chat=False, request_id="r", headers={}, block_size=16, session_header="x", hashes=hashes
        )
        ms = (time.perf_counter() - start) * 1e3
        print(f"request_info, {len(text)} characters (the bound), hashes={hashes}: {ms:.0f} ms")


if __name__ == "__main__":
    from saved import save_if_asked  # benchmarks/saved.py

    save_if_asked()  # --save PATH: this run's output, command, date and commit as a result record
    main()
