"""What a workload yields, and how prompts are shaped for the completions and chat APIs.

Token counts follow :mod:`infctl.tokens` (a token is a whitespace word; a chat prompt costs one marker per
message plus one), so the simulated engine's ``usage.prompt_tokens`` equals ``RequestSpec.input_tokens``.
"""

from __future__ import annotations

import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, Literal, Protocol, TypeVar

from infctl import tokens
from infctl.errors import ConfigError

Api = Literal["completions", "chat"]
Message = dict[str, str]

CHAT_OVERHEAD = 2
"""Tokens a one-message chat prompt adds to its content: the ``<|user|>`` and ``<|assistant|>`` markers."""


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """One request to send. Exactly one of ``prompt`` (completions) and ``messages`` (chat) is set."""

    input_tokens: int
    """Prompt tokens as the engine counts them (under the token convention)."""
    max_tokens: int
    prompt: str | None = None
    messages: tuple[Message, ...] | None = None
    at_s: float | None = None
    """Trace replay: seconds after the start at which to send it (time compression applied)."""
    session: int | None = None
    """Multi-turn: the conversation; a turn is sent only after the previous one finished."""
    group: int | None = None
    """Shared-prefix group, mixture component or trace line, for per-group analysis."""


class Workload(Protocol):
    """A deterministic source of requests: ``requests()`` starts over each time it is called."""

    @property
    def name(self) -> str: ...

    @property
    def size(self) -> int | None:
        """How many requests it holds; None when it never runs out."""
        ...

    @property
    def timed(self) -> bool:
        """Requests carry ``at_s`` (a trace to replay at its own pace)."""
        ...

    def requests(self) -> Iterator[RequestSpec]: ...


S = TypeVar("S")


@dataclass(frozen=True)
class EndlessWorkload(Generic[S]):
    """Requests drawn without end from ``spec`` by ``random.Random(seed)``; subclasses set ``name``."""

    spec: S
    api: Api
    seed: int = 0
    name: str = ""
    size: int | None = None
    """None: it never runs out (the load plan says when to stop)."""
    timed: bool = False


def read_input(path: Path, what: str, flag: str) -> str:
    """The UTF-8 text of a trace or dataset file; ConfigError naming it, and ``flag``, when it cannot be read.

    Devices and sockets are refused before reading (``/dev/zero`` would never end); a pipe is read, so
    ``--trace <(zcat trace.jsonl.gz)`` works. Bytes that are not UTF-8 are reported with their line.
    """
    try:
        mode = path.stat().st_mode
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISSOCK(mode):
            raise ConfigError(
                f"{path}: cannot read the {what}: a device or socket, not a file", hint=f"check {flag} PATH"
            )
        data = path.read_bytes()
    except OSError as e:
        raise ConfigError(
            f"{path}: cannot read the {what}: {e.strerror or e}", hint=f"check {flag} PATH"
        ) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        column = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise ConfigError(
            f"{path}:{line}: not UTF-8 text (byte {data[e.start]:#04x} at column {column})",
            hint=f"re-encode the {what} as UTF-8",
        ) from None


def overhead(api: Api) -> int:
    return CHAT_OVERHEAD if api == "chat" else 0


def single_prompt(api: Api, text: str, n_words: int, max_tokens: int, **extra: object) -> RequestSpec:
    """A one-message request whose content is ``text`` (``n_words`` words)."""
    if api == "chat":
        return RequestSpec(
            input_tokens=n_words + CHAT_OVERHEAD, max_tokens=max_tokens,
            messages=({"role": "user", "content": text},), **extra,  # type: ignore[arg-type]
        )  # fmt: skip
    return RequestSpec(input_tokens=n_words, max_tokens=max_tokens, prompt=text, **extra)  # type: ignore[arg-type]


def conversation_prompt(
    api: Api, messages: Sequence[Message], max_tokens: int, **extra: object
) -> RequestSpec:
    """A chat history: sent as messages (chat) or rendered the way the engine renders them (completions)."""
    n = tokens.count_tokens(tokens.chat_prompt_text(messages))
    if api == "chat":
        return RequestSpec(input_tokens=n, max_tokens=max_tokens, messages=tuple(messages), **extra)  # type: ignore[arg-type]
    prompt = tokens.chat_prompt_text(messages)
    return RequestSpec(input_tokens=n, max_tokens=max_tokens, prompt=prompt, **extra)  # type: ignore[arg-type]
