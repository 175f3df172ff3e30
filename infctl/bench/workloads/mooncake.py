"""Replay of a Mooncake-format trace (REFERENCE.md section 4).

Each line: ``timestamp`` (ms from start), ``input_length``, ``output_length`` (tokens) and ``hash_ids``, one
id per ``block_size`` tokens of the prompt. Each block's text is derived from its hash id alone (and the
seed), so equal ids give equal text and equal id prefixes give equal prompt prefixes: the trace's prefix
reuse reaches the engine's prefix cache as it did in production. The whole file is validated before any
request is sent; a bad line raises ``ConfigError`` naming ``file:line``: JSON that does not parse (``NaN``
and ``Infinity`` parse, then fail as numbers), bytes that are not UTF-8, and every field out of its range:
a finite ``timestamp`` in ``[0, 2**53]`` (a ``NaN`` or ``1e999`` left the replay waiting forever), lengths in
``[1, MAX_TRACE_TOKENS]`` and 64-bit integer hash ids. Lines are split on ``\n`` only (JSON Lines), so a
U+2028 inside a string neither splits a line nor shifts the numbers of the lines after it.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infctl.bench.workloads.base import Api, RequestSpec, overhead, read_input, single_prompt
from infctl.bench.workloads.specs import TraceSpec
from infctl.bench.workloads.text import BlockCache, words
from infctl.errors import ConfigError

SAMPLE_TRACE = "mooncake_synthetic_trace.jsonl"


def sample_trace() -> Path:
    """The public Mooncake trace shipped with infctl: ``$INFCTL_MOONCAKE_TRACE``, else ``data/`` of a source
    checkout, else the copy inside an installed wheel (``infctl/_data``)."""
    env = os.environ.get("INFCTL_MOONCAKE_TRACE")
    package = Path(__file__).resolve().parents[2]
    candidates = [Path(env)] if env else []
    candidates += [package.parent / "data" / SAMPLE_TRACE, package / "_data" / SAMPLE_TRACE]
    for path in candidates:
        if path.is_file():
            return path
    raise ConfigError(
        f"cannot find the Mooncake sample trace ({SAMPLE_TRACE})",
        hint="set INFCTL_MOONCAKE_TRACE to a Mooncake-format .jsonl file, or pass --trace FILE",
    )


MAX_TIMESTAMP_MS = float(2**53)
"""Largest ``timestamp`` (ms) accepted: every integer up to it is exact in a float (285,000 years; epoch
milliseconds are 1.7e12). Only differences from the first entry's timestamp are replayed."""
MAX_TRACE_TOKENS = 10_000_000
"""Largest ``input_length`` or ``output_length`` accepted: ten million tokens, past any model's context."""
_HASH_ID_RANGE = (-(2**63), 2**64 - 1)
"""Hash ids are 64-bit integers, signed or unsigned."""

_HINT = 'each line must be {"timestamp": ms, "input_length": n, "output_length": n, "hash_ids": [...]}'


@dataclass(frozen=True, slots=True)
class TraceEntry:
    line: int
    timestamp_ms: float
    input_length: int
    output_length: int
    hash_ids: tuple[int, ...]


def read_trace(path: Path, block_size: int = 512) -> list[TraceEntry]:
    """Every entry of the trace, sorted by timestamp; ConfigError with ``file:line`` on the first bad line."""
    text = read_input(path, "trace", "--trace")
    entries: list[TraceEntry] = []
    for lineno, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            entries.append(_entry(path, lineno, line, block_size))
    if not entries:
        raise ConfigError(f"{path}: the trace has no entries", hint=_HINT)
    entries.sort(key=lambda e: e.timestamp_ms)
    return entries


def _entry(path: Path, lineno: int, line: str, block_size: int) -> TraceEntry:
    where = f"{path}:{lineno}"
    try:
        obj: Any = json.loads(line)
    except (ValueError, RecursionError) as e:  # RecursionError: thousands of nested brackets
        raise ConfigError(f"{where}: not valid JSON ({e})", hint=_HINT) from None
    if not isinstance(obj, dict):
        raise ConfigError(f"{where}: expected a JSON object, found {type(obj).__name__}", hint=_HINT)
    ts = _number(obj, "timestamp", 0, MAX_TIMESTAMP_MS, where, integer=False)
    n_in = int(_number(obj, "input_length", 1, MAX_TRACE_TOKENS, where, integer=True))
    n_out = int(_number(obj, "output_length", 1, MAX_TRACE_TOKENS, where, integer=True))
    ids = obj.get("hash_ids")
    if not isinstance(ids, list):
        raise ConfigError(f"{where}: hash_ids: expected a list of integers, found {ids!r}", hint=_HINT)
    lo, hi = _HASH_ID_RANGE
    for i, h in enumerate(ids):
        if not isinstance(h, int) or isinstance(h, bool) or not lo <= h <= hi:
            raise ConfigError(
                f"{where}: hash_ids[{i}]: expected a 64-bit integer id, found {_shown(h)}", hint=_HINT
            )
    need = math.ceil(n_in / block_size)
    if len(ids) != need:
        raise ConfigError(
            f"{where}: hash_ids has {len(ids)} ids; input_length {n_in} needs {need} blocks of {block_size}",
            hint="set the trace's block size with --trace-block-size",
        )
    return TraceEntry(lineno, float(ts), n_in, n_out, tuple(ids))


def _number(obj: dict[str, Any], key: str, low: float, high: float, where: str, *, integer: bool) -> float:
    """``obj[key]`` when it is a finite number (an integer if ``integer``) in ``[low, high]``."""
    value: Any = obj.get(key)
    ok_type = isinstance(value, int) if integer else isinstance(value, int | float)
    if not ok_type or isinstance(value, bool) or not low <= value <= high:  # NaN fails the comparison
        kind, span = (
            ("an integer", f"{low:,} to {high:,}") if integer else ("a finite number", f"{low:g} to {high:g}")
        )
        raise ConfigError(f"{where}: {key}: expected {kind} from {span}, found {_shown(value)}", hint=_HINT)
    return float(value)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


@dataclass(frozen=True)
class TraceWorkload:
    spec: TraceSpec
    api: Api
    entries: tuple[TraceEntry, ...]
    seed: int = 0
    name: str = "trace"
    timed: bool = True

    @property
    def size(self) -> int:
        return len(self.entries)

    @property
    def block_tokens(self) -> int:
        """Tokens per hash id after ``input_scale``."""
        return max(1, round(self.spec.block_size * self.spec.input_scale))

    def salt(self, hash_id: int) -> int:
        return (self.seed << 40) + hash_id

    def input_tokens(self, e: TraceEntry) -> int:
        """The scaled (and capped) prompt length of one entry, chat markers included."""
        bw = self.block_tokens
        last = e.input_length - self.spec.block_size * (len(e.hash_ids) - 1)
        last_scaled = min(bw, max(1, round(last * self.spec.input_scale)))
        total = bw * (len(e.hash_ids) - 1) + last_scaled
        cap = self.spec.max_input_tokens
        return min(total, cap) if cap else total

    def requests(self) -> Iterator[RequestSpec]:
        cache = BlockCache(self.block_tokens)
        ov = overhead(self.api)
        start = self.entries[0].timestamp_ms
        for e in self.entries:
            budget = max(1, self.input_tokens(e) - ov)
            out = max(1, round(e.output_length * self.spec.output_scale))
            if self.spec.max_output_tokens:
                out = min(out, self.spec.max_output_tokens)
            at = (e.timestamp_ms - start) / 1000.0 / self.spec.time_compression
            text = self.prompt_text(e.hash_ids, budget, cache)
            yield single_prompt(self.api, text, budget, out, at_s=at, group=e.line)

    def prompt_text(self, hash_ids: tuple[int, ...], budget: int, cache: BlockCache | None = None) -> str:
        """The first ``budget`` words of blocks ``hash_ids`` (a short last block is a prefix of its text)."""
        cache = cache or BlockCache(self.block_tokens)
        parts: list[str] = []
        for h in hash_ids:
            take = min(cache.block_words, budget)
            parts.append(cache.get(self.salt(h)) if take == cache.block_words else words(take, self.salt(h)))
            budget -= take
            if budget <= 0:
                break
        return " ".join(parts)
