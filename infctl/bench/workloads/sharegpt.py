"""Prompts from a ShareGPT-format file (a JSON array, or JSON lines, of ``{"conversations": [...]}``).

Each conversation gives one request: its first human turn is the prompt, the length of the reply after it
the output length. As in vLLM's benchmark, conversations with a prompt or reply under ``min_tokens``, a
prompt over ``max_input_tokens`` or a total over ``max_total_tokens`` are skipped. Lengths are counted in
words (the token convention). A malformed entry raises ConfigError naming ``file:line``.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infctl import tokens
from infctl.bench.workloads.base import Api, RequestSpec, read_input, single_prompt
from infctl.bench.workloads.specs import ShareGPTSpec
from infctl.errors import ConfigError

_HINT = (
    'each entry must be {"conversations": [{"from": "human", "value": ...}, {"from": "gpt", "value": ...}]}'
)
_HUMAN = ("human", "user")
_BOT = ("gpt", "assistant", "chatgpt", "bard", "bing", "model")


@dataclass(frozen=True, slots=True)
class Sample:
    line: int
    prompt: str
    prompt_tokens: int
    output_tokens: int


def read_sharegpt(spec: ShareGPTSpec) -> list[Sample]:
    path = spec.path
    text = read_input(path, "dataset", "--dataset")
    samples: list[Sample] = []
    for line, obj in _entries(path, text):
        sample = _sample(path, line, obj, spec)
        if sample is not None:
            samples.append(sample)
    if not samples:
        raise ConfigError(
            f"{path}: no usable conversation (after length filters)",
            hint="check the file's format or raise --max-input-tokens",
        )
    return samples


def _entries(path: Path, text: str) -> Iterator[tuple[int, Any]]:
    """(line, parsed entry) for a JSON array (positions tracked per element) or JSON lines."""
    decoder = json.JSONDecoder()
    stripped = text.lstrip()
    if not stripped.startswith("["):
        for lineno, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                yield lineno, _loads(path, lineno, line, decoder)
        return
    pos = text.index("[") + 1
    n = len(text)
    while True:
        while pos < n and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= n:
            raise ConfigError(
                f"{path}:{text.count(chr(10), 0, n) + 1}: the JSON array is not closed", hint=_HINT
            )
        if text[pos] == "]":
            return
        lineno = text.count("\n", 0, pos) + 1
        try:
            obj, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as e:
            raise ConfigError(f"{path}:{e.lineno}:{e.colno}: {e.msg}", hint=_HINT) from None
        yield lineno, obj


def _loads(path: Path, lineno: int, line: str, decoder: json.JSONDecoder) -> Any:
    try:
        return decoder.decode(line)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}:{lineno}:{e.colno}: {e.msg}", hint=_HINT) from None


def _sample(path: Path, line: int, obj: Any, spec: ShareGPTSpec) -> Sample | None:
    turns = obj.get("conversations", obj.get("conversation")) if isinstance(obj, dict) else None
    if not isinstance(turns, list) or not all(isinstance(t, dict) for t in turns):
        raise ConfigError(f"{path}:{line}: expected an object with a list 'conversations'", hint=_HINT)
    roles = [str(t.get("from", t.get("role", ""))).lower() for t in turns]
    texts = [t.get("value", t.get("content")) for t in turns]
    if any(not isinstance(x, str) for x in texts):
        raise ConfigError(f"{path}:{line}: every turn needs a string 'value'", hint=_HINT)
    first = next((i for i, r in enumerate(roles) if r in _HUMAN), None)
    if first is None or first + 1 >= len(turns) or roles[first + 1] not in _BOT:
        return None  # nothing to measure an output length from
    prompt, reply = str(texts[first]), str(texts[first + 1])
    n_in, n_out = tokens.count_tokens(prompt), tokens.count_tokens(reply)
    too_short = n_in < spec.min_tokens or (spec.output is None and n_out < spec.min_tokens)
    if too_short or n_in > spec.max_input_tokens or n_in + n_out > spec.max_total_tokens:
        return None
    return Sample(line, prompt, n_in, n_out)


@dataclass(frozen=True)
class ShareGPTWorkload:
    spec: ShareGPTSpec
    api: Api
    samples: tuple[Sample, ...]
    seed: int = 0
    name: str = "sharegpt"
    timed: bool = False

    @property
    def size(self) -> int:
        return len(self.samples)

    def requests(self) -> Iterator[RequestSpec]:
        rng = random.Random(self.seed)
        order = list(self.samples)
        if self.spec.shuffle:
            rng.shuffle(order)
        for s in order:
            out = self.spec.output.sample(rng) if self.spec.output else s.output_tokens
            # Collapse whitespace so the engine's word count is the one measured above.
            text = " ".join(s.prompt.split())
            yield single_prompt(self.api, text, s.prompt_tokens, out, group=s.line)
