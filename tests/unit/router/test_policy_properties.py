"""Properties every preset must keep, whatever the cluster looks like."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from routerkit import backends_and_states, matches_for, requests

from infctl.router import PRESETS, NoBackendError, PolicySettings, Snapshot, build_policy
from infctl.router.policies.scorers import SCORERS
from infctl.router.policies.types import Context

PRESET_NAMES = sorted(PRESETS)
LIMIT = PolicySettings().stale_after_s


@settings(max_examples=300, deadline=None)
@given(data=st.data(), preset=st.sampled_from(PRESET_NAMES))
def test_never_picks_a_dead_backend_or_a_stale_one_when_fresh_ones_exist(
    data: st.DataObject, preset: str
) -> None:
    snapshot = data.draw(backends_and_states())
    req = data.draw(requests())
    matches = data.draw(matches_for(snapshot, req))
    policy = build_policy(preset)
    eligible = [b for b in snapshot.backends if b.routable and b.role == "both"]
    try:
        decision = policy.decide(snapshot, req, matches=matches)
    except NoBackendError as err:
        assert not eligible and err.reason in ("no_healthy", "no_role")
        return
    chosen = snapshot.by_id[decision.backend_id]
    assert chosen in eligible
    if any(not snapshot.state(b.id).is_stale(LIMIT) for b in eligible):
        assert not snapshot.state(chosen.id).is_stale(LIMIT)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), name=st.sampled_from(sorted(SCORERS)))
def test_scores_are_within_unit_interval(data: st.DataObject, name: str) -> None:
    snapshot = data.draw(backends_and_states())
    req = data.draw(requests())
    ctx = Context(snapshot, req, PolicySettings(), data.draw(matches_for(snapshot, req)))
    cands = tuple(b.id for b in snapshot.backends)
    scores = SCORERS[name]({}, "t")(ctx, cands)
    assert len(scores) == len(cands)
    assert all(0.0 <= s <= 1.0 for s in scores)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), preset=st.sampled_from([p for p in PRESET_NAMES if p != "round_robin"]))
def test_replicas_agree_even_when_backends_are_listed_in_another_order(
    data: st.DataObject, preset: str
) -> None:
    snapshot = data.draw(backends_and_states())
    req = data.draw(requests())
    matches = data.draw(matches_for(snapshot, req))
    shuffled = list(snapshot.backends)
    random.Random(data.draw(st.integers())).shuffle(shuffled)
    other = Snapshot(tuple(shuffled), dict(snapshot.states), snapshot.now)
    a, b = build_policy(preset), build_policy(preset)
    try:
        first = a.decide(snapshot, req, matches=matches)
    except NoBackendError:
        with pytest.raises(NoBackendError):
            b.decide(other, req, matches=matches)
        return
    second = b.decide(other, req, matches=dict(matches))
    assert (first.backend_id, first.reason) == (second.backend_id, second.reason)
