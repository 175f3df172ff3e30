"""doctor's tokens check: the router's count of a probe against the engine's own /tokenize."""

from __future__ import annotations

from infctl.doctor.router_eval import evaluate_tokens


def test_equal_counts_pass_and_name_the_tokenizer() -> None:
    r = evaluate_tokens(
        {"count": 41, "tokenizer": "hf:/models/qwen", "exact": True}, {"count": 41}, "http://e"
    )
    assert r.status == "pass" and "hf:/models/qwen" in r.summary


def test_an_estimate_that_differs_warns_with_the_fix() -> None:
    r = evaluate_tokens({"count": 30, "tokenizer": "estimate", "exact": False}, {"count": 41}, "http://e")
    assert r.status == "warn" and r.fix is not None and "--tokenizer" in r.fix


def test_a_real_tokenizer_that_differs_fails() -> None:
    r = evaluate_tokens({"count": 39, "tokenizer": "hf:/other", "exact": True}, {"count": 41}, "http://e")
    assert r.status == "fail" and "39" in r.summary and "41" in r.summary


def test_nothing_to_compare_is_skipped() -> None:
    assert evaluate_tokens(None, {"count": 1}, "http://e").status == "skip"
    assert evaluate_tokens({"count": 1, "tokenizer": "words"}, None, "http://e").status == "skip"
