"""Cost of counting a prompt's tokens (``infctl.tokens.count_tokens``) against ``len(text.split())``, and of
its token ids (``infctl.tokens.token_ids``) against the convention's plain definition (split, encode and
CRC-32 each word), side by side in one run, on prompts of the router's sizes. Pure CPU; prints per-call
microseconds and the ratios, then what ``request_info`` (count only, and with block hashes) costs on a
prompt at the default ``max_prompt_chars``: the longest the event loop can be held by one request's prompt.

    python benchmarks/bench_token_count.py [--words 32768] [--repeat 200]
"""

from __future__ import annotations

import argparse
import time
import zlib
from collections.abc import Callable
from typing import Any

from infctl.router.config import RouterConfig
from infctl.router.requests import request_info
from infctl.tokens import chat_prompt_text, count_tokens, synth_words, token_ids


def _per_call_us(fn: Callable[[str], Any], text: str, repeat: int) -> float:
    best = float("inf")
    for _ in range(5):  # best of five rounds: the least disturbed by other processes on the machine
        start = time.perf_counter()
        for _ in range(repeat):
            fn(text)
        best = min(best, (time.perf_counter() - start) / repeat)
    return best * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--words", type=int, nargs="+", default=[512, 4096, 32768])
    ap.add_argument("--repeat", type=int, default=200)
    args = ap.parse_args()

    def split_count(text: str) -> int:
        return len(text.split())

    def split_ids(text: str) -> list[int]:
        return [zlib.crc32(w.encode("utf-8", "surrogatepass")) for w in text.split()]

    head = f"{'prompt':>28} {'split us':>10} {'count us':>10} {'ratio':>7}"
    print(f"{head} {'ids: split us':>14} {'ids us':>8} {'ratio':>7}")
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
            assert count_tokens(text) == split_count(text) and token_ids(text) == split_ids(text)
            old, new = (
                _per_call_us(split_count, text, args.repeat),
                _per_call_us(count_tokens, text, args.repeat),
            )
            old_ids, new_ids = (
                _per_call_us(split_ids, text, args.repeat),
                _per_call_us(token_ids, text, args.repeat),
            )
            print(
                f"{name:>28} {old:10.1f} {new:10.1f} {old / new:6.1f}x"
                f" {old_ids:14.1f} {new_ids:8.1f} {old_ids / new_ids:6.1f}x"
            )

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
    main()
