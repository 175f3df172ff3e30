"""Prompt tokens as the engines count them: one layer the router, the benchmark and the simulator share.

* :class:`HFTokenizer`: the model's own tokenizer and chat template (exact);
* :class:`EstimateTokenizer`: a language-independent estimate when the model's files are not at hand;
* :class:`WordTokenizer`: the simulator's convention (``infctl.tokens``), for use with ``infctl sim``;
* :class:`EngineTokenizer`: the engines' own ``/tokenize`` over HTTP (exact; no files needed);
* :func:`load_tokenizer`: the one a setting names (``auto``, ``estimate``, ``words``, ``engine:URL``, a
  path, a model id).

Errors: :class:`TokenizerError` (an ``InfctlError``) for files that do not load and messages a chat
template refuses; its :class:`EngineUnavailable` when no engine answers ``/tokenize``.
"""

from typing import TYPE_CHECKING, Any

from infctl.tokenization.base import (
    CHAT_OPTIONS,
    Tokenizer,
    TokenizerError,
    chat_options,
    check_messages,
    content_text,
    message_text,
)
from infctl.tokenization.engine import EngineTokenizer, EngineUnavailable
from infctl.tokenization.estimate import EstimateTokenizer
from infctl.tokenization.load import KEYWORDS, load_tokenizer
from infctl.tokenization.words import WordTokenizer

if TYPE_CHECKING:
    from infctl.tokenization.hf import HFTokenizer


def __getattr__(name: str) -> Any:
    """``HFTokenizer`` on first use: it imports Jinja2 for chat templates (~0.1 s of every start-up)."""
    if name == "HFTokenizer":
        from infctl.tokenization.hf import HFTokenizer

        return HFTokenizer
    raise AttributeError(f"module 'infctl.tokenization' has no attribute {name!r}")


__all__ = [
    "CHAT_OPTIONS",
    "KEYWORDS",
    "EngineTokenizer",
    "EngineUnavailable",
    "EstimateTokenizer",
    "HFTokenizer",
    "Tokenizer",
    "TokenizerError",
    "WordTokenizer",
    "chat_options",
    "check_messages",
    "content_text",
    "load_tokenizer",
    "message_text",
]
