"""Multi-turn conversations: each turn resends the whole history plus a new user message.

Replies in the history are synthesized with the length the previous turn asked for, so prompt lengths are
known before the run and every turn's prompt starts with the previous turn's prompt (a cacheable prefix).
The load generator sends a turn only after the conversation's previous turn has finished.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field

from infctl.bench.workloads.base import EndlessWorkload, Message, RequestSpec
from infctl.bench.workloads.prompts import WORDS, Prompts
from infctl.bench.workloads.specs import MultiTurnSpec


@dataclass(slots=True)
class _Conversation:
    id: int
    messages: list[Message] = field(default_factory=list)
    turn: int = 0


@dataclass(frozen=True)
class MultiTurnWorkload(EndlessWorkload[MultiTurnSpec]):
    name: str = "multi-turn"
    prompts: Prompts = WORDS

    def requests(self) -> Iterator[RequestSpec]:
        rng = random.Random(self.seed)
        opened = 0

        def new() -> _Conversation:
            nonlocal opened
            conv = _Conversation(opened)
            opened += 1
            if self.spec.system_tokens:
                text = self.prompts.content(self.spec.system_tokens, rng)
                conv.messages.append({"role": "system", "content": text})
            return conv

        slots = [new() for _ in range(self.spec.conversations)]
        while True:
            for i, conv in enumerate(slots):
                user = self.prompts.content(self.spec.input.sample(rng), rng)
                conv.messages.append({"role": "user", "content": user})
                out = self.spec.output.sample(rng)
                yield self.prompts.conversation(
                    self.api, conv.messages, out, session=conv.id, group=conv.turn
                )
                conv.messages.append({"role": "assistant", "content": self.prompts.content(out, rng)})
                conv.turn += 1
                if conv.turn >= self.spec.turns:
                    slots[i] = new()
