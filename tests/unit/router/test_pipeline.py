"""Building policies from config dicts, and what each piece decides."""

from __future__ import annotations

from collections import Counter

import pytest
from routerkit import STALE, fresh, request, snap

from infctl.errors import ConfigError
from infctl.router import Backend, NoBackendError, PolicyState, build_policy

B3 = [Backend("a"), Backend("b"), Backend("c")]


def chi_square(counts: Counter[str], expected: dict[str, float]) -> float:
    total = sum(counts.values())
    return sum((counts[k] - total * p) ** 2 / (total * p) for k, p in expected.items())


def test_every_cli_preset_builds() -> None:
    for name in (
        "round_robin",
        "random",
        "least_load",
        "power_of_two",
        "session",
        "kv_usage",
        "prefix",
        "prefix_precise",
        "cache_aware",
    ):
        assert build_policy(name).name == name


def test_dict_config_overrides_a_preset() -> None:
    policy = build_policy(
        {"preset": "cache_aware", "index": "precise", "settings": {"stale_after_s": 0.5, "gate_abs": 4}}
    )
    assert policy.index == "precise"
    assert policy.settings.stale_after_s == 0.5 and policy.settings.gate_abs == 4.0
    assert [s.name for s in policy.scorers] == ["cost"]


def test_llm_d_style_config() -> None:
    policy = build_policy(
        {
            "filters": ["healthy", "role"],
            "scorers": [
                {"name": "queue", "weight": 2},
                {"name": "kv_usage", "weight": 2},
                {"name": "prefix", "weight": 3},
            ],
            "picker": "max",
        }
    )
    assert [(s.name, s.weight) for s in policy.scorers] == [
        ("queue", 2.0),
        ("kv_usage", 2.0),
        ("prefix", 3.0),
    ]


@pytest.mark.parametrize(
    ("config", "where"),
    [
        ({"preset": "nope"}, "policy.preset"),
        ({"scorers": [{"name": "queu"}]}, "policy.scorers[0].name"),
        ({"scorers": [{"name": "queue", "weight": -1}]}, "policy.scorers[0].weight"),
        ({"scorers": [{"name": "queue", "bogus": 1}]}, "policy.scorers[0]"),
        ({"filters": ["role", {"name": "role", "roles": ["gpu"]}]}, "policy.filters[1].roles"),
        ({"picker": "best"}, "policy.picker"),
        ({"index": "exact"}, "policy.index"),
        ({"settings": {"stale_after": 1}}, "policy.settings.stale_after"),
        ({"settings": {"gate_abs": "high"}}, "policy.settings.gate_abs"),
        ({"colour": "blue"}, "policy"),
    ],
)
def test_config_errors_name_the_key_path(config: dict[str, object], where: str) -> None:
    with pytest.raises(ConfigError) as err:
        build_policy(config)
    assert err.value.message.startswith(where)


def test_hard_filters_fail_with_a_reason() -> None:
    policy = build_policy("least_load")
    down = [Backend("a", ejected=True), Backend("b", draining=True), Backend("c", healthy=False)]
    with pytest.raises(NoBackendError) as err:
        policy.decide(snap(down), request())
    assert err.value.reason == "no_healthy"
    with pytest.raises(NoBackendError) as err:
        policy.decide(snap([Backend("p", role="prefill")]), request())
    assert err.value.reason == "no_role"


def test_model_filter() -> None:
    policy = build_policy({"preset": "least_load", "filters": ["role", "model"]})
    backends = [Backend("a", models=("llama",)), Backend("b", models=("qwen",))]
    assert policy.decide(snap(backends), request(model="qwen")).backend_id == "b"


def test_stale_signals_count_as_saturated_but_still_serve_when_alone() -> None:
    policy = build_policy("least_load")
    states = {"a": STALE, "b": fresh(queue=9, running=40), "c": STALE}
    assert policy.decide(snap(B3, states), request()).backend_id == "b"
    all_stale = {"a": STALE, "b": STALE, "c": STALE}
    assert policy.decide(snap(B3, all_stale), request()).backend_id in {"a", "b", "c"}


def test_stale_after_is_a_setting() -> None:
    states = {"a": fresh(age=0.3), "b": fresh(age=0.1, running=30), "c": fresh(age=0.3)}
    assert build_policy("least_load").decide(snap(B3, states), request()).backend_id == "b"
    relaxed = build_policy({"preset": "least_load", "settings": {"stale_after_s": 1.0}})
    assert relaxed.decide(snap(B3, states), request()).backend_id in {"a", "c"}


def test_least_load_uses_the_router_count_when_engine_signals_lag() -> None:
    states = {"a": fresh(inflight=5), "b": fresh(running=3), "c": fresh(inflight=1, running=2)}
    decision = build_policy("least_load").decide(snap(B3, states), request())
    assert decision.backend_id == "c" and decision.reason == "least_load"


def test_round_robin_cycles_with_an_explicit_state() -> None:
    policy, state = build_policy("round_robin"), PolicyState()
    picks = [policy.decide(snap(B3), request(f"r{i}"), state=state).backend_id for i in range(6)]
    assert picks == ["a", "b", "c", "a", "b", "c"]
    assert state.cursor == 6


def test_ties_break_by_request_id_and_spread_evenly() -> None:
    policy = build_policy("least_load")
    counts = Counter(policy.decide(snap(B3), request(f"id-{i}")).backend_id for i in range(3000))
    assert chi_square(counts, {"a": 1 / 3, "b": 1 / 3, "c": 1 / 3}) < 13.8  # p = 0.001, 2 dof
    again = Counter(policy.decide(snap(B3), request(f"id-{i}")).backend_id for i in range(3000))
    assert again == counts


def test_random_picker_honours_backend_weights() -> None:
    backends = [Backend("a", weight=1), Backend("b", weight=2), Backend("c", weight=5)]
    policy = build_policy("random")
    counts = Counter(policy.decide(snap(backends), request(f"x{i}")).backend_id for i in range(16000))
    assert chi_square(counts, {"a": 1 / 8, "b": 2 / 8, "c": 5 / 8}) < 13.8


def test_power_of_two_takes_the_less_loaded_of_two() -> None:
    backends = [Backend(f"b{i}") for i in range(8)]
    states = {b.id: fresh(running=i) for i, b in enumerate(backends)}
    policy = build_policy("power_of_two")
    picks = Counter(policy.decide(snap(backends, states), request(f"p{i}")).backend_id for i in range(2000))
    assert picks["b7"] == 0  # never the better of two
    assert picks["b0"] > picks["b6"] > 0


def test_session_affinity_is_sticky_and_only_moves_the_lost_backends_sessions() -> None:
    policy = build_policy("session")
    four = [Backend(f"b{i}") for i in range(4)]
    owners = {
        f"s{i}": policy.decide(snap(four), request(f"r{i}", session_key=f"s{i}")).backend_id
        for i in range(200)
    }
    assert len(set(owners.values())) == 4
    again = {k: policy.decide(snap(four), request("other", session_key=k)).backend_id for k in owners}
    assert again == owners
    three = four[:3]
    moved = {k: policy.decide(snap(three), request("x", session_key=k)).backend_id for k in owners}
    assert all(moved[k] == v for k, v in owners.items() if v != "b3")
    assert policy.decide(snap(four), request(session_key="s1")).reason == "session"


def test_kv_usage_prefers_free_cache() -> None:
    states = {"a": fresh(kv=0.9), "b": fresh(kv=0.2), "c": fresh(kv=0.5)}
    decision = build_policy("kv_usage").decide(snap(B3, states), request())
    assert decision.backend_id == "b"


def test_plain_prefix_takes_the_longest_match() -> None:
    decision = build_policy("prefix").decide(snap(B3), request(blocks=10), matches={"a": 3, "c": 7})
    assert (decision.backend_id, decision.reason, decision.matched_blocks) == ("c", "prefix_hit", 7)


def test_cache_aware_reasons() -> None:
    policy = build_policy("cache_aware")
    req = request(blocks=100)
    hit = policy.decide(snap(B3), req, matches={"a": 10, "b": 90, "c": 10})
    assert (hit.backend_id, hit.reason) == ("b", "prefix_hit")
    # Blocks every backend holds (the shared system prompt) are no reason to prefer anyone.
    common = policy.decide(snap(B3), req, matches={"a": 40, "b": 40, "c": 40})
    assert common.reason == "least_load"
    busy = {"a": fresh(), "b": fresh(running=40, inflight=40), "c": fresh()}
    gated = policy.decide(snap(B3, busy), req, matches={"a": 10, "b": 90, "c": 10})
    assert gated.backend_id != "b" and gated.reason == "load_gate"


def test_cache_aware_trades_cache_for_queue_in_token_units() -> None:
    policy = build_policy("cache_aware")
    req = request(blocks=100)  # 1600 tokens; "b" holds 1440 of them, alone
    # Queued prefill counts at cost_queue_weight (0.25): "b" costs 160 + q/4 against 1600 elsewhere, plus
    # 20 x 1440 for recomputing blocks only "b" holds (duplicate_weight 20): it keeps the request up to
    # 120960 queued tokens while it carries no more than 8 requests above the mean (duplicate_slack).
    deep_queue = {"a": fresh(), "b": fresh(queued_tokens=115000), "c": fresh()}
    assert policy.decide(snap(B3, deep_queue), req, matches={"b": 90}).backend_id == "b"
    deeper_queue = {"a": fresh(), "b": fresh(queued_tokens=125000), "c": fresh()}
    assert policy.decide(snap(B3, deeper_queue), req, matches={"b": 90}).backend_id != "b"
    # 13 requests on "b", none elsewhere (mean 4.3): past the slack, the lone copy weighs 1 (floor):
    # up to 11520 queued tokens.
    short_queue = {"a": fresh(), "b": fresh(queued_tokens=11000, inflight=13), "c": fresh()}
    assert policy.decide(snap(B3, short_queue), req, matches={"b": 90}).backend_id == "b"
    long_queue = {"a": fresh(), "b": fresh(queued_tokens=12000, inflight=13), "c": fresh()}
    assert policy.decide(snap(B3, long_queue), req, matches={"b": 90}).backend_id != "b"
    # 12 requests (not past 4 + 8): still protected at 20.
    near = {"a": fresh(), "b": fresh(queued_tokens=12000, inflight=12), "c": fresh()}
    assert policy.decide(snap(B3, near), req, matches={"b": 90}).backend_id == "b"
    # Without the duplicate weights, the plain cost: up to 5760 queued tokens.
    plain = build_policy(
        {"preset": "cache_aware", "scorers": [{"name": "cost", "duplicate_weight": 0, "duplicate_floor": 0}]}
    )
    mid_queue = {"a": fresh(), "b": fresh(queued_tokens=6500), "c": fresh()}
    assert plain.decide(snap(B3, mid_queue), req, matches={"b": 90}).backend_id != "b"
    assert policy.decide(snap(B3, mid_queue), req, matches={"b": 90}).backend_id == "b"


def test_cost_duplicate_weight_0_is_the_plain_cost_whatever_the_holder_s_load() -> None:
    """The floor never exceeds the weight: with duplicate_weight 0 a busy holder's lone copy is not
    protected more than a calm one's (the default floor 1 did: the busy holder kept the request)."""
    req = request(blocks=100)
    zero = build_policy({"preset": "cache_aware", "scorers": [{"name": "cost", "duplicate_weight": 0}]})
    for inflight in (0, 13):  # 13: past the slack of 8 above the mean
        states = {"a": fresh(), "b": fresh(queued_tokens=6500, inflight=inflight), "c": fresh()}
        assert zero.decide(snap(B3, states), req, matches={"b": 90}).backend_id != "b"


def test_cache_aware_copies_a_prefix_two_backends_hold_at_the_plain_cost() -> None:
    """Only blocks one backend holds alone weigh extra: once a prefix has a second copy, a third backend
    takes it on load alone, so a hot prefix keeps fanning out."""
    b4 = [*B3, Backend("d")]
    policy = build_policy("cache_aware")
    req = request(blocks=100)
    # "a" and "b" hold 90 blocks (below the shared quorum of 3 of 4); "c" is idle, they are not.
    busy = {"a": fresh(queued_tokens=7000), "b": fresh(queued_tokens=7000), "c": fresh(), "d": fresh()}
    held = {"a": 90, "b": 90}
    assert policy.decide(snap(b4, busy), req, matches=held).backend_id in ("c", "d")
    # The same queues with only "a" holding the prefix: copying it would cost 20 x 1440 more, "a" keeps it.
    assert policy.decide(snap(b4, busy), req, matches={"a": 90}).backend_id == "a"


@pytest.mark.parametrize("value", [-1, "1", True, float("inf")])
@pytest.mark.parametrize("key", ["duplicate_weight", "duplicate_slack", "duplicate_floor"])
def test_cost_duplicate_weight_is_validated(key: str, value: object) -> None:
    with pytest.raises(ConfigError, match=rf"scorers\[0\]\.{key}"):
        build_policy({"preset": "cache_aware", "scorers": [{"name": "cost", key: value}]})
    with pytest.raises(ConfigError, match="duplicate_weight"):
        build_policy({"preset": "cache_aware", "scorers": [{"name": "cost", "dup": 1}]})


def test_decision_carries_scores_for_the_log() -> None:
    decision = build_policy("weighted").decide(snap(B3), request(blocks=4), matches={"a": 4})
    assert set(decision.scores) == {"a", "b", "c"}
    assert decision.scores["a"] == max(decision.scores.values())


def test_cache_aware_charges_a_long_prompt_the_whole_queue_ahead_of_it() -> None:
    # The business day's missed prompt (simulate compare autoscaling, t=128.5 s): "a" has no queue but the
    # heaviest decode, "b" a 15k-token queue. A 129k-token prompt is prefilled after all of "b"'s queue, so
    # it goes to "a" (1.88 s there against 2.08 s on "b" in the simulator); a short prompt shares "b"'s queue
    # steps and still goes to "b".
    policy = build_policy("cache_aware")
    states = {
        "a": fresh(inflight=34, inflight_tokens=305_394, capacity=None),
        "b": fresh(inflight=28, queued_tokens=15_181, inflight_tokens=225_783, capacity=None),
        "c": fresh(inflight=3, queued_tokens=96_733, inflight_tokens=97_014, capacity=None),
    }
    assert policy.decide(snap(B3, states), request(tokens=129_024)).backend_id == "a"
    assert policy.decide(snap(B3, states), request(tokens=1_000)).backend_id == "b"
