"""A split batch's answer merged as vLLM 0.32 answers a batch (``completion/serving.py``): choice
``p * n + k``, usage summed, the last prompt's ``prompt_tokens_details``, no per-request ``metrics``."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from infctl.router.pd_batch import merge_answers, sample_count, shares, summed_usage


def answer(prompt: int, n: int, cached: int) -> dict[str, Any]:
    choices = [{"index": k, "text": f"p{prompt}s{k}", "finish_reason": "length"} for k in range(n)]
    tokens = 10 * (prompt + 1)
    usage = {"prompt_tokens": tokens, "completion_tokens": 4 * n, "total_tokens": tokens + 4 * n,
             "prompt_tokens_details": {"cached_tokens": cached}}  # fmt: skip
    return {"id": "cmpl-r", "object": "text_completion", "model": "m", "choices": choices, "usage": usage,
            "kv_transfer_params": None, "metrics": {"ttft": 0.1}}  # fmt: skip


def test_choices_are_numbered_prompt_by_prompt_and_usage_adds_up() -> None:
    merged = json.loads(merge_answers([answer(0, 2, 5), answer(1, 2, 7), answer(2, 2, 3)], 2))
    assert [(c["index"], c["text"]) for c in merged["choices"]] == [
        (0, "p0s0"), (1, "p0s1"), (2, "p1s0"), (3, "p1s1"), (4, "p2s0"), (5, "p2s1"),
    ]  # fmt: skip
    assert merged["usage"] == {"prompt_tokens": 60, "completion_tokens": 24, "total_tokens": 84,
                               "prompt_tokens_details": {"cached_tokens": 3}}  # fmt: skip
    assert "metrics" not in merged
    assert (merged["id"], merged["model"], merged["kv_transfer_params"]) == ("cmpl-r", "m", None)


def test_usage_without_details_and_n() -> None:
    assert summed_usage([{"prompt_tokens": 2, "completion_tokens": 1}], None) == {
        "prompt_tokens": 2, "completion_tokens": 1, "total_tokens": 3,
    }  # fmt: skip
    assert [sample_count(b) for b in ({}, {"n": None}, {"n": 3}, {"n": True})] == [1, 1, 3, 1]


@given(st.integers(0, 10_000), st.lists(st.integers(0, 500), min_size=1, max_size=8))
def test_prefill_shares_add_up_to_the_batch(total: int, sizes: list[int]) -> None:
    parts = [{"prompt": "x" * s} for s in sizes]
    out = shares(total, parts)
    assert sum(out) == total and len(out) == len(sizes) and min(out) >= 0
