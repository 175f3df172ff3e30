"""Router verdicts on the admin API's JSON, as fixtures."""

from __future__ import annotations

from typing import Any

from infctl.config import DeploymentProfile
from infctl.doctor.router_eval import (
    evaluate_backends,
    evaluate_freshness,
    evaluate_policy,
    evaluate_profile_policy,
    evaluate_ready,
    stale_after,
)


def backend(bid: str, **fields: Any) -> dict[str, Any]:
    return {
        "id": bid,
        "url": bid,
        "role": "both",
        "group": None,
        "ejected": False,
        "draining": False,
        "last_error": None,
        "signals_age_s": 0.05,
        **fields,
    }


def test_ejected_backends_are_listed_with_their_last_error() -> None:
    rows = [backend("a"), backend("b", ejected=True, last_error="health probe: HTTP 503 (dead)")]
    result = evaluate_backends(rows)
    assert result.status == "fail"
    assert "1 of 2 ejected: b: health probe: HTTP 503 (dead)" in result.summary
    assert evaluate_backends([backend("a"), backend("b", draining=True)]).status == "pass"
    assert evaluate_backends([]).status == "fail"


def test_ready_needs_a_backend_in_rotation() -> None:
    assert evaluate_ready(200, {"ready": True, "routable": 2}).status == "pass"
    assert evaluate_ready(503, {"ready": False, "routable": 0}).status == "fail"


def test_signal_freshness_against_the_policy_threshold() -> None:
    fresh = evaluate_freshness([backend("a", signals_age_s=0.1)], 0.2)
    assert fresh.status == "pass" and "limit 200 ms" in fresh.summary
    late = evaluate_freshness([backend("a", signals_age_s=0.5)], 0.2)
    assert late.status == "warn" and "a: 500 ms" in late.summary
    never = evaluate_freshness([backend("a", signals_age_s=None), backend("b", signals_age_s=3.0)], 0.2)
    assert never.status == "fail" and "a: never scraped" in never.summary and "b: 3000 ms" in never.summary
    # an ejected backend is the backends check's business, not this one's
    assert evaluate_freshness([backend("a", ejected=True, signals_age_s=None)], 0.2).status == "pass"


def test_stale_threshold_comes_from_the_policy_settings() -> None:
    assert stale_after({"preset": "cache_aware", "settings": {"stale_after_s": 0.5}}) == 0.5
    assert stale_after("cache_aware") == 0.2
    assert stale_after(None) == 0.2


def test_policy_sanity() -> None:
    assert [r.status for r in evaluate_policy("cache_aware", [backend("a"), backend("b")])] == ["pass"]
    single = evaluate_policy("prefix", [backend("a")], kv_batches=0)
    assert [r.status for r in single] == ["warn"] and "single backend" in single[0].summary
    precise = evaluate_policy("prefix_precise", [backend("a"), backend("b")], kv_batches=0)
    assert any("no KV events" in r.summary for r in precise)
    assert evaluate_policy("prefix_precise", [backend("a"), backend("b")], kv_batches=12)[0].status == "pass"
    pd = evaluate_policy(
        "round_robin", [backend("p", role="prefill", group="g0"), backend("d", role="decode", group="g1")]
    )
    summaries = sorted(r.summary for r in pd)
    assert summaries == [
        "group g0 has prefill backends and no decode backend",
        "group g1 has decode backends and no prefill backend",
    ]
    assert all(r.status == "fail" for r in pd)
    assert evaluate_policy({"preset": "nope"}, [backend("a")])[0].status == "fail"


def profile(policy: str, kv_events: bool) -> DeploymentProfile:
    model: dict[str, Any] = {"engine": "vllm", "model": "m", "sim": {"profile": "llama3-8b-h100"}}
    if kv_events:
        model["kv_events"] = {"port": 5557}
    return DeploymentProfile.model_validate(
        {"name": "p", "target": "local", "mode": "aggregated", "model": model, "router": {"policy": policy}}
    )


def test_profile_precise_policy_needs_kv_events() -> None:
    [bad] = evaluate_profile_policy(profile("prefix_precise", kv_events=False))
    assert bad.status == "fail" and "kv_events" in (bad.fix or "")
    assert evaluate_profile_policy(profile("prefix_precise", kv_events=True))[0].status == "pass"
    [unknown] = evaluate_profile_policy(profile("no_such_policy", kv_events=False))
    assert unknown.status == "fail" and "router.policy" in unknown.summary
