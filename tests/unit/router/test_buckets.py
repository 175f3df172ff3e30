"""Length bucketing: short and long requests go to their own pools, with fallback."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from routerkit import STALE, backends_and_states, fresh, request, snap

from infctl.errors import ConfigError
from infctl.router import Backend, NoBackendError, Policy, Snapshot, build_policy
from infctl.router.policies.buckets import parse_buckets

BUCKETS = [
    {"name": "short", "max_tokens": 2048, "pools": ["short"]},
    {"name": "long", "pools": ["long"], "spill_to": []},
]
POOLS = [Backend("s1", pool="short"), Backend("s2", pool="short"), Backend("l1", pool="long")]


def policy() -> Policy:
    return build_policy({"preset": "least_load", "buckets": BUCKETS})


def test_requests_go_to_their_bucket_pool_and_short_ones_come_first() -> None:
    short = policy().decide(snap(POOLS), request(tokens=500))
    long = policy().decide(snap(POOLS), request(tokens=9000))
    assert short.backend_id in {"s1", "s2"} and (short.bucket, short.priority, short.fallback) == (
        "short",
        0,
        False,
    )
    assert long.backend_id == "l1" and (long.bucket, long.priority) == ("long", 1)
    assert policy().decide(snap(POOLS), request(tokens=2048)).bucket == "short"  # thresholds are inclusive


def test_saturated_short_pool_spills_into_the_long_pool() -> None:
    states = {"s1": fresh(queue=9), "s2": fresh(kv=0.95), "l1": fresh()}
    d = policy().decide(snap(POOLS, states), request(tokens=100))
    assert (d.backend_id, d.fallback) == ("l1", True)


def test_saturated_long_pool_does_not_spill_when_spill_to_is_empty() -> None:
    states = {"s1": fresh(), "s2": fresh(), "l1": fresh(queue=50)}
    d = policy().decide(snap(POOLS, states), request(tokens=9000))
    assert (d.backend_id, d.fallback) == ("l1", False)


def test_by_default_long_prompts_never_spill_into_the_short_pool() -> None:
    default = [{**BUCKETS[0]}, {"name": "long", "pools": ["long"]}]
    pol = build_policy({"preset": "least_load", "buckets": default})
    states = {"s1": fresh(), "s2": fresh(), "l1": fresh(kv=0.9, queue=6)}
    d = pol.decide(snap(POOLS, states), request(tokens=9000))
    assert (d.backend_id, d.fallback) == ("l1", False)
    states = {"s1": fresh(queue=9), "s2": fresh(queue=9), "l1": fresh()}
    assert pol.decide(snap(POOLS, states), request(tokens=100)).backend_id == "l1"  # short still spills up


def test_stale_signals_do_not_make_a_pool_spill() -> None:
    states = {"s1": STALE, "s2": fresh(queue=9), "l1": fresh()}
    d = policy().decide(snap(POOLS, states), request(tokens=100))
    assert d.backend_id in {"s1", "s2"} and not d.fallback


def test_spill_targets_must_be_freshly_free() -> None:
    states = {"s1": fresh(queue=9), "s2": fresh(queue=9), "l1": STALE}
    d = policy().decide(snap(POOLS, states), request(tokens=100))
    assert d.backend_id in {"s1", "s2"} and not d.fallback


def test_empty_pool_falls_back_to_any_backend() -> None:
    dead_long = [POOLS[0], POOLS[1], Backend("l1", pool="long", ejected=True)]
    d = policy().decide(snap(dead_long), request(tokens=9000))
    assert d.backend_id in {"s1", "s2"} and d.fallback


def test_everything_saturated_stays_home() -> None:
    states = {"s1": STALE, "s2": STALE, "l1": STALE}
    d = policy().decide(snap(POOLS, states), request(tokens=100))
    assert d.backend_id in {"s1", "s2"} and not d.fallback


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        ([], "buckets"),
        ([{"name": "a", "pools": ["x"]}, {"name": "b", "pools": ["y"]}], "buckets[0].max_tokens"),
        (
            [{"name": "a", "max_tokens": 10, "pools": ["x"]}, {"name": "b", "max_tokens": 5, "pools": ["y"]}],
            "buckets[1].max_tokens",
        ),
        ([{"name": "a", "pools": []}], "buckets[0].pools"),
        ([{"name": "a", "pools": ["x"], "spill_to": ["zz"]}], "buckets[0].spill_to"),
        ([{"name": "a", "pools": ["x"], "size": 3}], "buckets[0]"),
    ],
)
def test_bucket_config_errors(raw: object, where: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_buckets(raw)
    assert err.value.message.startswith(where)


@settings(max_examples=200, deadline=None)
@given(snapshot=backends_and_states(), tokens=st.integers(0, 10_000))
def test_bucketing_never_picks_a_dead_backend_and_prefers_its_pool(snapshot: Snapshot, tokens: int) -> None:
    try:
        d = policy().decide(snapshot, request(tokens=tokens))
    except NoBackendError:
        assert not any(b.routable and b.role == "both" for b in snapshot.backends)
        return
    chosen = snapshot.by_id[d.backend_id]
    assert chosen.routable
    home = "short" if tokens <= 2048 else "long"
    if not d.fallback:
        assert chosen.pool == home
    else:
        assert chosen.pool != home
