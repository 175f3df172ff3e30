"""Reading request bodies: the prompt estimate is the same whether or not block hashes are computed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tokenizerkit import thinking_model, tiny_tokenizer

from infctl.router import build_policy
from infctl.router.requests import BadRequest, exact_count, prompt_chars, request_info
from infctl.router.snapshot import RequestInfo
from infctl.tokenization import EstimateTokenizer, Tokenizer, WordTokenizer, load_tokenizer

__all__ = ["tiny_tokenizer"]


class Forbidden(Tokenizer):
    """Fails the test if anything is tokenized."""

    def encode(self, text: str, *, special: bool = True) -> list[int]:
        raise AssertionError("tokenised")

    def chat_ids(self, messages: Any, **options: Any) -> list[int]:
        raise AssertionError("tokenised")


def info(
    body: dict[str, Any],
    *,
    chat: bool = False,
    hashes: bool = True,
    tok: Tokenizer | None = None,
    own_template: bool = False,
) -> Any:
    return request_info(
        body,
        chat=chat,
        request_id="r",
        headers={"x-session": "s1"},
        block_size=4,
        session_header="x-session",
        tokenizer=tok or WordTokenizer(),
        hashes=hashes,
        own_template=own_template,
    )


@pytest.mark.parametrize(
    ("body", "chat"),
    [
        ({"model": "m", "prompt": "a b c d e f g h i", "max_tokens": 7, "stream": True}, False),
        ({"model": "m", "prompt": ["a b c d e", "a b c d f g"]}, False),
        ({"model": "m", "prompt": [[5, 6, 7, 8, 9], [5, 6, 7, 8]]}, False),
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
        ({"model": "m", "prompt": ["a b c", "d e f g"]}, False),  # 12 (a batch: no space between)
        ({"model": "m", "prompt": [list(range(6)), list(range(5))]}, False),
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


class Bos(WordTokenizer):
    """Words after a BOS id, which most models' tokenizers add to every prompt they encode."""

    def encode(self, text: str, *, special: bool = True) -> list[int]:
        return [1, *super().encode(text)] if special else super().encode(text)

    def count(self, text: str, *, special: bool = True) -> int:
        return super().count(text) + special


@pytest.mark.parametrize(
    ("prompt", "tokens"),
    [
        (["a b", "c d e"], 2 + 1 + 3 + 1),  # each prompt its own sequence, its own BOS (vLLM's usage)
        ([[5, 6, 7], [8, 9]], 5),
        ([[5, 6, 7]], 3),
        (["a b c"], 4),
    ],
)
def test_a_batch_counts_every_prompt_as_vllm_does(prompt: list[Any], tokens: int) -> None:
    """vLLM's serving_completion makes one engine request per prompt of a batch, and its
    ``usage.prompt_tokens`` sums theirs: the router's count (routing, /tokenize, the count after routing)
    is that sum, not a count of the prompts joined into one text."""
    body = {"model": "m", "prompt": prompt}
    for hashes in (True, False):
        assert info(body, hashes=hashes, tok=Bos()).prompt_tokens == tokens
    assert exact_count(body, chat=False, tokenizer=Bos()) == tokens


def test_the_estimate_counts_a_batch_prompt_by_prompt() -> None:
    body = {"model": "m", "prompt": ["abcd", "efgh"]}
    assert info(body, tok=EstimateTokenizer()).prompt_tokens == 2  # joined, "abcd efgh" would be 3
    assert prompt_chars(body, chat=False) == 8


@pytest.mark.parametrize(
    ("batch", "shared"),
    [
        (["s t u v w x y z q", "s t u v w x y z r r r r"], "s t u v w x y z"),
        (["p q r s t u v w"] * 3, "p q r s t u v w"),
        (["s t u v w", "a b c d e"], ""),
    ],
)
def test_a_batch_is_routed_on_the_blocks_every_prompt_starts_with(batch: list[str], shared: str) -> None:
    """One backend serves the whole batch: the blocks that pay off for every prompt on it are the ones
    they all start with (their common prefix), hashed as that prefix alone would be."""
    got = info({"model": "m", "prompt": batch}, tok=Bos())
    alone = info({"model": "m", "prompt": shared}, tok=Bos())
    assert list(got.block_hashes) == list(alone.block_hashes)
    assert got.prompt_tokens == sum(Bos().count(p) for p in batch)
    ids = [list(range(9)), [*range(8), 99, 100]]
    by_ids = info({"model": "m", "prompt": ids})
    assert list(by_ids.block_hashes) == list(info({"model": "m", "prompt": ids[0][:8]}).block_hashes)
    assert by_ids.num_blocks == 2 and by_ids.prompt_tokens == 19


@pytest.mark.parametrize("prompt", [[], ["a", [1]], [[1], "a"], [[1, "x"]], [1, [2]], [None]])
def test_a_prompt_vllm_would_not_take_is_refused(prompt: list[Any]) -> None:
    for hashes in (True, False):
        with pytest.raises(BadRequest, match="token-id lists"):
            info({"model": "m", "prompt": prompt}, hashes=hashes)


def test_an_agent_conversation_is_counted_as_the_template_renders_it(tiny_tokenizer: Path) -> None:
    """An assistant turn that is only tool calls carries ``content: null`` (OpenAI-style agents always
    send it so); vLLM serves it, so the router counts it rather than answering 400."""
    tok = load_tokenizer(str(tiny_tokenizer))
    args = '{"city": "x"}'
    call = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": args}}
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    ]
    body = {"model": "m", "messages": messages}
    assert info(body, chat=True, tok=tok).prompt_tokens == len(tok.chat_ids(messages)) > 0
    assert prompt_chars(body, chat=True) > len("weather?sunny") + len(
        "get_weather" + call["function"]["arguments"]
    )


def test_a_chat_carrying_its_own_template_is_counted_and_hashed_with_it(tiny_tokenizer: Path) -> None:
    """vLLM renders a request's ``chat_template`` when started with --trust-request-chat-template: a router
    told so (``trust_request_chat_template``) renders it too. Untrusted (vLLM refuses the request, the
    count no longer matters), the router ignores it and renders the model's: no client runs its template."""
    tok = load_tokenizer(str(tiny_tokenizer))
    messages = [{"role": "user", "content": "hello there"}]
    own = "{% for m in messages %}{% for _ in range(9) %} {{ m['content'] }}{% endfor %}{% endfor %}"
    body = {"model": "m", "messages": messages, "chat_template": own}
    counted = info(body, chat=True, tok=tok, own_template=True)
    assert counted.prompt_tokens == tok.count(" hello there" * 9, special=False)
    plain = info({"model": "m", "messages": messages}, chat=True, tok=tok)
    assert counted.prompt_tokens != plain.prompt_tokens
    assert exact_count(body, chat=True, tokenizer=tok, own_template=True) == counted.prompt_tokens
    with pytest.raises(BadRequest, match="does not compile"):
        info({**body, "chat_template": "{% if %}"}, chat=True, tok=tok, own_template=True)
    for untrusted in (
        body,
        {**body, "chat_template": "{% if %}"},
        {**body, "chat_template_kwargs": {"chat_template": own}},
    ):
        got = info(untrusted, chat=True, tok=tok)
        assert (got.prompt_tokens, got.block_hashes) == (plain.prompt_tokens, plain.block_hashes)
        assert exact_count(untrusted, chat=True, tokenizer=tok) == plain.prompt_tokens


def test_template_kwargs_and_developer_turns_are_counted_as_vllm_renders_them(tiny_tokenizer: Path) -> None:
    """vLLM 0.32 serves ``chat_template_kwargs`` carrying ``chat_template`` (trusted: it is the template) or
    ``tokenize`` (not a template variable) without a 400, and turns a ``developer`` message into a system one
    for a template that does not name the role: the router counts each so, and a non-object
    ``chat_template_kwargs`` is a 400 (vLLM's too), not a failure of the router."""
    tok = load_tokenizer(str(tiny_tokenizer))
    messages = [{"role": "user", "content": "hello there"}]
    body: dict[str, Any] = {"model": "m", "messages": messages}
    own = "{% for m in messages %}{% for _ in range(5) %} {{ m['content'] }}{% endfor %}{% endfor %}"
    kw = {**body, "chat_template_kwargs": {"chat_template": own, "tokenize": False}}
    five = tok.count(" hello there" * 5, special=False)
    assert info(kw, chat=True, tok=tok, own_template=True).prompt_tokens == five
    assert exact_count(kw, chat=True, tokenizer=tok, own_template=True) == five
    developer = {**body, "messages": [{"role": "developer", "content": "be brief"}, *messages]}
    system = {**body, "messages": [{"role": "system", "content": "be brief"}, *messages]}
    assert info(developer, chat=True, tok=tok).block_hashes == info(system, chat=True, tok=tok).block_hashes
    for wrong in ("tokenize", ["chat_template"]):
        with pytest.raises(BadRequest, match="chat_template_kwargs") as caught:
            info({**body, "chat_template_kwargs": wrong}, chat=True, tok=tok)
        assert caught.value.status == 400


def test_reasoning_effort_is_counted_as_vllm_renders_it(tmp_path: Path, tiny_tokenizer: Path) -> None:
    """vLLM 0.32's chat route renders a thinking model's template with the request's ``reasoning_effort``
    and the ``enable_thinking`` it implies (Qwen3's empty think block when "none"): so does the router."""
    tok = load_tokenizer(str(thinking_model(tmp_path / "thinking", tiny_tokenizer)))
    messages = [{"role": "user", "content": "hello there"}]
    body: dict[str, Any] = {"model": "m", "messages": messages}
    off = {**body, "reasoning_effort": "none"}
    counted = info(off, chat=True, tok=tok)
    assert counted.prompt_tokens == len(tok.chat_ids(messages, reasoning_effort="none"))
    assert counted.prompt_tokens > info(body, chat=True, tok=tok).prompt_tokens
    assert exact_count(off, chat=True, tokenizer=tok) == counted.prompt_tokens
