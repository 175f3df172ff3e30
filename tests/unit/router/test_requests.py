"""Reading request bodies: the prompt estimate is the same whether or not block hashes are computed."""

from __future__ import annotations

from typing import Any

import pytest

from infctl.router import build_policy
from infctl.router.requests import BadRequest, request_info
from infctl.router.snapshot import RequestInfo
from infctl.tokenization import Tokenizer, WordTokenizer


class Forbidden(Tokenizer):
    """Fails the test if anything is tokenized."""

    def encode(self, text: str, *, special: bool = True) -> list[int]:
        raise AssertionError("tokenised")

    def chat_ids(self, messages: Any, **options: Any) -> list[int]:
        raise AssertionError("tokenised")


def info(body: dict[str, Any], *, chat: bool = False, hashes: bool = True) -> Any:
    return request_info(
        body,
        chat=chat,
        request_id="r",
        headers={"x-session": "s1"},
        block_size=4,
        session_header="x-session",
        tokenizer=WordTokenizer(),
        hashes=hashes,
    )


@pytest.mark.parametrize(
    ("body", "chat"),
    [
        ({"model": "m", "prompt": "a b c d e f g h i", "max_tokens": 7, "stream": True}, False),
        ({"model": "m", "prompt": ["a b c", "d e f g h"]}, False),
        ({"model": "m", "prompt": [5, 6, 7, 8, 9]}, False),
        ({"model": "m", "messages": [{"role": "user", "content": "one two three four five"}]}, True),
    ],
)
def test_without_hashes_only_the_hashes_differ(body: dict[str, Any], chat: bool) -> None:
    full, cheap = info(body, chat=chat), info(body, chat=chat, hashes=False)
    assert full.block_hashes and not cheap.block_hashes
    assert (cheap.prompt_tokens, cheap.model, cheap.session_key, cheap.is_stream, cheap.max_tokens) == (
        full.prompt_tokens,
        full.model,
        full.session_key,
        full.is_stream,
        full.max_tokens,
    )


def test_a_bad_prompt_is_rejected_either_way() -> None:
    for hashes in (True, False):
        with pytest.raises(BadRequest):
            info({"model": "m", "prompt": {"no": "pe"}}, hashes=hashes)


@pytest.mark.parametrize(
    ("body", "chat"),
    [
        ({"model": "m", "prompt": "a b c d e f"}, False),  # 11 characters
        ({"model": "m", "prompt": ["a b c", "d e f"]}, False),
        ({"model": "m", "prompt": list(range(11))}, False),
        (
            {"model": "m", "messages": [{"role": "user", "content": "abc def g"}]},
            True,
        ),  # role and content: 13 characters
    ],
)
def test_a_prompt_over_the_bound_is_refused_with_413_before_tokenising(
    body: dict[str, Any], chat: bool
) -> None:
    for hashes in (True, False):
        with pytest.raises(BadRequest) as err:
            info_bounded(body, chat=chat, hashes=hashes, limit=10)
        assert err.value.status == 413 and "max_prompt_chars" in str(err.value)
        assert info_bounded(body, chat=chat, hashes=hashes, limit=30).prompt_tokens > 0


def test_the_bound_is_checked_before_token_ids_are_read() -> None:
    for hashes in (True, False):
        with pytest.raises(BadRequest):
            info_bounded(
                {"model": "m", "prompt": "x" * 100}, chat=False, hashes=hashes, limit=99, tok=Forbidden()
            )


def info_bounded(
    body: dict[str, Any], *, chat: bool, hashes: bool, limit: int, tok: Tokenizer | None = None
) -> Any:
    return request_info(
        body,
        chat=chat,
        request_id="r",
        headers={},
        block_size=4,
        session_header="x-session",
        tokenizer=tok or WordTokenizer(),
        hashes=hashes,
        max_prompt_chars=limit,
    )


def test_without_a_prefix_index_nothing_is_tokenised_or_hashed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """round_robin (index none) only counts the prompt: no token ids, no block hashes."""

    class CountOnly(WordTokenizer):
        def encode(self, text: str, *, special: bool = True) -> list[int]:
            raise AssertionError("built token ids for a policy that uses no prefix index")

    def forbidden(*_: object, **__: object) -> Any:
        raise AssertionError("hashed for a policy that uses no prefix index")

    assert build_policy("round_robin").index == "none"  # what the proxy passes as hashes=False
    expected = info({"model": "m", "prompt": "a b c d e f g h i"}).prompt_tokens
    monkeypatch.setattr(RequestInfo, "from_ids", forbidden)
    got = request_info(
        {"model": "m", "prompt": "a b c d e f g h i"},
        chat=False,
        request_id="r",
        headers={},
        block_size=4,
        session_header="x-session",
        tokenizer=CountOnly(),
        hashes=False,
    )
    assert (got.prompt_tokens, got.block_hashes) == (expected, ())
