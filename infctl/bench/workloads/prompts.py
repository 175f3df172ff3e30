"""Prompts of exact token lengths: what a workload sends when it promises "a prompt of N tokens".

:class:`WordPrompts` is the simulator's convention (``infctl.tokens``: N whitespace words, one marker per
chat message plus one), unchanged: a simulated engine's ``usage.prompt_tokens`` equals the promise.
:class:`TokenizerPrompts` writes English, Chinese, code or mixed text (``scripts``) and cuts it where the
tokenizer counts exactly N prompt tokens, as ``vllm bench`` and guidellm do: for completions the prompt as
the engine tokenizes it (special tokens included), for chat the one message rendered by the model's chat
template. A length no text reaches exactly (a chat prompt shorter than its template) gets the nearest, and
``RequestSpec.input_tokens`` is always what the tokenizer counts.
"""

from __future__ import annotations

import queue
import random
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

from infctl.bench.workloads.base import (
    Api,
    Message,
    RequestSpec,
    conversation_prompt,
    overhead,
    single_prompt,
)
from infctl.bench.workloads.scripts import TextKind, units
from infctl.bench.workloads.text import SALT_BITS, unique_words, words
from infctl.errors import ConfigError
from infctl.tokenization import EstimateTokenizer, HFTokenizer, Tokenizer, WordTokenizer

_FILLERS: dict[TextKind, tuple[str, ...]] = {
    "en": (" the", " of", " and", " a", " to", ",", "."),
    "zh": ("的", "一", "是", "了", "在", "\uff0c"),
    "code": (" x", ";", "\n", " =", "1"),
    "mixed": (" the", "的", ";", "\n", " a", "一"),
}
"""Short pieces that usually cost one token: appended one by one to land on an exact count."""


class Prompts(Protocol):
    """How a workload writes its prompts (see the module docstring)."""

    def single(self, api: Api, n: int, out: int, rng: random.Random, **extra: object) -> RequestSpec:
        """A one-message request of ``n`` prompt tokens (chat: template included), unique text."""
        ...

    def prefix(self, n: int, salt: int) -> str:
        """Text of ``n`` tokens shared by every request that uses ``salt``."""
        ...

    def after_prefix(
        self, api: Api, prefix: str, n_prefix: int, n: int, out: int, rng: random.Random, **extra: object
    ) -> RequestSpec:
        """``prefix`` (``n_prefix`` tokens) then ``n`` tokens of unique text."""
        ...

    def content(self, n: int, rng: random.Random) -> str:
        """A message's content of about ``n`` tokens, unique text."""
        ...

    def conversation(self, api: Api, messages: list[Message], out: int, **extra: object) -> RequestSpec:
        """A chat history, as messages (chat) or rendered by the chat template (completions)."""
        ...


class WordPrompts:
    """The simulator's convention: N tokens are N words (``infctl.bench.workloads.text``)."""

    def single(self, api: Api, n: int, out: int, rng: random.Random, **extra: object) -> RequestSpec:
        n = max(1, n - overhead(api))
        return single_prompt(api, unique_words(n, rng), n, out, **extra)

    def prefix(self, n: int, salt: int) -> str:
        return words(n, salt)

    def after_prefix(
        self, api: Api, prefix: str, n_prefix: int, n: int, out: int, rng: random.Random, **extra: object
    ) -> RequestSpec:
        return single_prompt(api, f"{prefix} {unique_words(n, rng)}", n_prefix + n, out, **extra)

    def content(self, n: int, rng: random.Random) -> str:
        return unique_words(n, rng)

    def conversation(self, api: Api, messages: list[Message], out: int, **extra: object) -> RequestSpec:
        return conversation_prompt(api, messages, out, **extra)


WORDS = WordPrompts()


def make_prompts(tokenizer: Tokenizer | None, kind: TextKind = "en") -> Prompts:
    """How prompts are written for ``tokenizer`` (None: none named) and ``kind`` of text: English under
    the simulator's words as they always were; other text, with no tokenizer named, cut by the
    language-independent estimate (its true length comes back in ``usage``)."""
    if isinstance(tokenizer, WordTokenizer) or (tokenizer is None and kind == "en"):
        if kind != "en":
            raise ConfigError(
                f"--text {kind} cannot be counted in whitespace words (a run of Chinese is one 'word')",
                hint="name the model's tokenizer with --tokenizer, or --tokenizer estimate",
            )
        return WORDS
    return TokenizerPrompts(tokenizer or EstimateTokenizer(), kind)


@dataclass(frozen=True)
class TokenizerPrompts:
    """Text of ``kind`` cut to exact lengths under ``tokenizer``."""

    tokenizer: Tokenizer
    kind: TextKind = "en"

    def measure(self, api: Api) -> Callable[[str], int]:
        """Prompt tokens of a request whose only message (or prompt) is the text."""
        tok = self.tokenizer
        if api == "chat":
            return lambda text: len(tok.chat_ids([{"role": "user", "content": text}]))
        return tok.count

    def single(self, api: Api, n: int, out: int, rng: random.Random, **extra: object) -> RequestSpec:
        text, got = fit(self.measure(api), "", units(self.kind, rng.getrandbits(SALT_BITS)), n, self.kind)
        return _request(api, text, got, out, extra)

    def prefix(self, n: int, salt: int) -> str:
        return fit(self.tokenizer.count, "", units(self.kind, salt), n, self.kind, special=False)[0]

    def after_prefix(
        self, api: Api, prefix: str, n_prefix: int, n: int, out: int, rng: random.Random, **extra: object
    ) -> RequestSpec:
        measure = self.measure(api)
        head = f"{prefix}\n"
        target = measure(prefix) + n  # the prefix as the engine counts it at the start of a prompt
        text, got = fit(measure, head, units(self.kind, rng.getrandbits(SALT_BITS)), target, self.kind)
        return _request(api, text, got, out, extra)

    def content(self, n: int, rng: random.Random) -> str:
        stream = units(self.kind, rng.getrandbits(SALT_BITS))
        return fit(self.tokenizer.count, "", stream, n, self.kind, special=False)[0]

    def conversation(self, api: Api, messages: list[Message], out: int, **extra: object) -> RequestSpec:
        tok = self.tokenizer
        if api == "chat":
            n = len(tok.chat_ids(messages))
            return RequestSpec(input_tokens=n, max_tokens=out, messages=tuple(messages), **extra)  # type: ignore[arg-type]
        template = tok.template if isinstance(tok, HFTokenizer) else None
        if template is None:
            return conversation_prompt(api, messages, out, **extra)
        prompt = template.render(messages)
        return RequestSpec(input_tokens=tok.count(prompt), max_tokens=out, prompt=prompt, **extra)  # type: ignore[arg-type]


def _request(api: Api, text: str, n: int, out: int, extra: dict[str, object]) -> RequestSpec:
    chat = api == "chat"
    messages = ({"role": "user", "content": text},) if chat else None
    prompt = None if chat else text
    return RequestSpec(input_tokens=n, max_tokens=out, prompt=prompt, messages=messages, **extra)  # type: ignore[arg-type]


def fit(
    measure: Callable[..., int],
    head: str,
    stream: Iterator[str],
    n: int,
    kind: TextKind,
    *,
    special: bool | None = None,
) -> tuple[str, int]:
    """``head`` and a run of ``stream``'s units that counts ``n`` tokens; when no run does (a unit that
    costs two tokens jumps over ``n``), the longest run below with one-token fillers appended. Returns the
    text and its count (``n`` unless no text gets there: then the nearest above).

    Counting the whole text is the cost (a few ms for thousands of tokens), so the cut is found by the
    secant method on units -> tokens, which is nearly linear: about four counts, not a bisection's twelve.
    """

    def count(text: str) -> int:
        return measure(text) if special is None else measure(text, special=special)

    taken: list[str] = []
    cut = [0]  # cut[i]: characters of the first i units

    def text_of(k: int) -> str:
        while len(taken) < k:
            taken.append(next(stream))
            cut.append(cut[-1] + len(taken[-1]))
        return head + "".join(taken)[: cut[k]] if k else head

    base = count(head)
    if base >= n:
        return head, base
    low, low_count = 0, base  # a run of ``low`` units counts below n ...
    high, high_count = None, 0  # ... and one of ``high`` units above it
    k = n - base
    most = 64 * n + 4096  # units: past this the text never reaches n (words counting Chinese, say)
    while k <= most:
        c = count(text_of(k))
        if c == n:
            return text_of(k), n
        if c < n:
            low, low_count = k, c
        else:
            high, high_count = k, c
        if high is not None and high - low <= 1:
            break
        guess = k + round((n - c) * k / max(1, c - base))
        if high is not None:
            guess = min(max(guess, low + 1), high - 1)
        k = max(guess, low + 1)
    if high is None:
        return text_of(low), low_count
    text, c = text_of(low), low_count
    for _ in range(n - c + 8):
        step = next(((f, got) for f in _FILLERS[kind] if (got := count(text + f)) == c + 1), None)
        if step is None:
            break
        text, c = text + step[0], step[1]
        if c == n:
            return text, n
    return text_of(high), high_count


def prefetched(requests: Iterator[RequestSpec], depth: int = 64) -> Iterator[RequestSpec]:
    """``requests``, produced ``depth`` ahead in a worker thread: a real tokenizer spends a few
    milliseconds fitting a long prompt (and releases the GIL), which the send loop should not wait on."""
    box: queue.Queue[RequestSpec | BaseException | None] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            for spec in requests:
                while not stop.is_set():
                    try:
                        box.put(spec, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            box.put(None)
        except BaseException as exc:
            box.put(exc)

    threading.Thread(target=produce, name="bench-prompts", daemon=True).start()
    try:
        while True:
            item = box.get()
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()


__all__ = ["WORDS", "Prompts", "TokenizerPrompts", "WordPrompts", "fit", "make_prompts", "prefetched"]
