"""The model's tokenizer on the router's path: ``encode`` against ``encode_batch_fast`` (ids without the
character offsets), side by side in one run, on 2,000-token-class prompts in English, Chinese and code.
Prints CPU milliseconds per prompt (best of rounds) and the ratio; ``infctl.tokenization.hf`` uses the
faster call when the installed ``tokenizers`` has it.

    python benchmarks/bench_hf_encode.py [--tokenizer PATH] [--rounds 7]

Default tokenizer: tests/tokenizerkit.py's byte-level BPE, built into a temporary directory.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from tokenizerkit import build_tokenizer, chinese, code, english


def cpu_ms(fn: Callable[[], Any], rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        began = time.process_time()
        fn()
        best = min(best, time.process_time() - began)
    return best * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--tokenizer", help="a tokenizer.json or a directory holding one (default: the tests' kit)"
    )
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    path = Path(args.tokenizer) if args.tokenizer else build_tokenizer(Path(tempfile.mkdtemp()))
    file = path / "tokenizer.json" if path.is_dir() else path
    tok = Tokenizer.from_file(str(file))
    rng = random.Random(1)
    prompts = {"English": english(rng, 2048), "Chinese": chinese(rng, 3000), "code": code(rng, 200)}
    print(f"tokenizer: {file}")
    print(f"{'prompt':<10} {'tokens':>7} {'encode ms':>10} {'fast ms':>8} {'fast/encode':>12}")
    for name, text in prompts.items():
        ids = tok.encode(text, add_special_tokens=False).ids
        assert tok.encode_batch_fast([text], add_special_tokens=False)[0].ids == ids  # the same ids
        slow = cpu_ms(lambda t=text: tok.encode(t, add_special_tokens=False).ids, args.rounds)
        fast = cpu_ms(lambda t=text: tok.encode_batch_fast([t], add_special_tokens=False)[0].ids, args.rounds)
        print(f"{name:<10} {len(ids):>7} {slow:>10.2f} {fast:>8.2f} {fast / slow:>12.2f}")


if __name__ == "__main__":
    from saved import save_if_asked  # benchmarks/saved.py

    save_if_asked()  # --save PATH: this run's output, command, date and commit as a result record
    main()
