"""Typed workload descriptions (what the CLI builds, or a ``--workload-file`` holds)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, model_validator

from infctl.bench.workloads.lengths import LengthDist, Strict


class RandomSpec(Strict):
    """Unrelated prompts with lengths drawn from distributions (nothing shared between requests)."""

    kind: Literal["random"] = "random"
    input: LengthDist = LengthDist(mean=512)
    """Prompt tokens."""
    output: LengthDist = LengthDist(mean=128)
    """Output tokens (``max_tokens``; add ``--extra-body '{"ignore_eos":true}'`` for real engines)."""


class MixComponent(Strict):
    name: str = ""
    weight: float = Field(gt=0)
    """Relative share of requests."""
    input: LengthDist
    output: LengthDist


class MixtureSpec(Strict):
    """A weighted mixture of length profiles, e.g. 80% short chats and 20% long documents."""

    kind: Literal["mixture"] = "mixture"
    components: list[MixComponent] = Field(min_length=1)


class SharedPrefixSpec(Strict):
    """Groups of requests sharing a long prefix (a system prompt, a document); group popularity is Zipf."""

    kind: Literal["shared-prefix"] = "shared-prefix"
    groups: int = Field(default=8, ge=1)
    prefix_tokens: int = Field(default=2048, ge=1)
    """Tokens of the shared part at the start of every prompt of a group."""
    zipf: float = Field(default=1.0, ge=0)
    """Exponent s: group k (0-based) is chosen with probability proportional to 1 / (k + 1)^s; 0 = uniform."""
    input: LengthDist = LengthDist(mean=256)
    """Tokens after the prefix (unique to each request)."""
    output: LengthDist = LengthDist(mean=128)


class MultiTurnSpec(Strict):
    """Conversations whose history grows: turn k sends all earlier turns plus a new user message."""

    kind: Literal["multi-turn"] = "multi-turn"
    conversations: int = Field(default=16, ge=1)
    """Conversations open at once; a new one starts when one ends."""
    turns: int = Field(default=5, ge=1)
    system_tokens: int = Field(default=0, ge=0)
    """Tokens of a system prompt distinct per conversation; 0 means none."""
    input: LengthDist = LengthDist(mean=128)
    """Tokens of each new user message."""
    output: LengthDist = LengthDist(mean=128)
    """Tokens of each reply; the history holds a synthesized reply of that length."""


class TraceSpec(Strict):
    """Replay of a Mooncake-format trace (timestamp ms, input_length, output_length, hash_ids)."""

    kind: Literal["trace"] = "trace"
    path: Path
    time_compression: float = Field(default=1.0, gt=0, allow_inf_nan=False)
    """Timestamps are divided by this: 10 replays the trace ten times faster."""
    input_scale: float = Field(default=1.0, gt=0, allow_inf_nan=False)
    """Multiplies every block's length (so equal hash ids stay equal text) and thus every prompt."""
    output_scale: float = Field(default=1.0, gt=0, allow_inf_nan=False)
    block_size: int = Field(default=512, ge=1)
    """Tokens per hash id in the trace (Mooncake: 512)."""
    max_input_tokens: int | None = Field(default=None, ge=1)
    """Cut longer prompts to this many tokens (a cut prompt keeps its prefix)."""
    max_output_tokens: int | None = Field(default=None, ge=1)


class ShareGPTSpec(Strict):
    """Prompts from a ShareGPT-format file: the first human turn; output length from the first reply."""

    kind: Literal["sharegpt"] = "sharegpt"
    path: Path
    output: LengthDist | None = None
    """Override the reply-derived output length."""
    max_input_tokens: int = Field(default=1024, ge=1)
    max_total_tokens: int = Field(default=2048, ge=2)
    min_tokens: int = Field(default=4, ge=1)
    """Conversations whose prompt or reply is shorter are skipped (as vLLM's benchmark does)."""
    shuffle: bool = True

    @model_validator(mode="after")
    def _check(self) -> ShareGPTSpec:
        if self.max_input_tokens >= self.max_total_tokens:
            raise ValueError("max_input_tokens must be below max_total_tokens")
        return self


WorkloadSpec = Annotated[
    RandomSpec | MixtureSpec | SharedPrefixSpec | MultiTurnSpec | TraceSpec | ShareGPTSpec,
    Field(discriminator="kind"),
]
"""Any workload, told apart by ``kind``."""
