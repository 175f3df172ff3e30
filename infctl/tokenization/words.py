"""The simulator's convention as a tokenizer: a token is a whitespace-separated word (``infctl.tokens``).

``infctl sim`` counts this way by default, so a router or benchmark in front of simulated engines selects it
to agree with them exactly. It is never a default for real engines: a 3,000-character Chinese prompt is one
"word".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from infctl import tokens
from infctl.tokenization.base import Tokenizer, message_text


class WordTokenizer(Tokenizer):
    name = "words"
    exact = False
    off_loop_chars = 65536
    """As the estimate: ~0.3 ms per 60,000 characters, less than a worker thread's two loop wake-ups."""

    def encode(self, text: str, *, special: bool = True) -> list[int]:
        return tokens.token_ids(text)

    def count(self, text: str, *, special: bool = True) -> int:
        return tokens.count_tokens(text)

    def chat_ids(self, messages: Sequence[Mapping[str, Any]], **options: Any) -> list[int]:
        """The words of the rendered chat; like a real template, no closing assistant marker when the
        request continues its final message or asks for no generation prompt."""
        return tokens.token_ids(self.chat_text(messages, generation_prompt=self.generation_prompt(options)))

    @staticmethod
    def generation_prompt(options: Mapping[str, Any]) -> bool:
        """Whether a chat request's options (or body) render the closing assistant marker."""
        return options.get("add_generation_prompt", True) is not False and not options.get(
            "continue_final_message"
        )

    @staticmethod
    def chat_text(messages: Sequence[Mapping[str, Any]], *, generation_prompt: bool = True) -> str:
        """Each message's role marker and text: its content and its tool calls' (``message_text``), as a
        template writes both; an agent's assistant turn may be nothing but tool calls."""
        return tokens.chat_prompt_text(
            ({"role": m.get("role", "user"), "content": message_text(m)} for m in messages),
            generation_prompt=generation_prompt,
        )
