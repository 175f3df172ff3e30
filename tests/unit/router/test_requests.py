"""Reading request bodies: the prompt estimate is the same whether or not block hashes are computed."""

from __future__ import annotations

from typing import Any

import pytest

from infctl.router.requests import BadRequest, request_info


def info(body: dict[str, Any], *, chat: bool = False, hashes: bool = True) -> Any:
    return request_info(
        body,
        chat=chat,
        request_id="r",
        headers={"x-session": "s1"},
        block_size=4,
        session_header="x-session",
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
