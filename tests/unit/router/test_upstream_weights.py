"""Weighted upstream groups (cutover old/new) and mirroring."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st
from routerkit import request, snap
from test_pipeline import chi_square

from infctl.router import Backend, build_policy
from infctl.router.policies.weights import mirror_target, parse_upstreams, pick_upstream, should_mirror

IDS = [f"req-{i}" for i in range(20_000)]


def test_split_matches_the_weights() -> None:
    weights = {"old": 70.0, "new": 25.0, "canary": 5.0}
    counts = Counter(pick_upstream(i, weights) for i in IDS)
    assert chi_square(counts, {"old": 0.70, "new": 0.25, "canary": 0.05}) < 13.8  # type: ignore[arg-type]


def test_zero_weight_gets_nothing_and_no_weights_gives_none() -> None:
    assert {pick_upstream(i, {"old": 1.0, "new": 0.0}) for i in IDS[:500]} == {"old"}
    assert pick_upstream("x", {}) is None


@settings(max_examples=50, deadline=None)
@given(before=st.floats(0, 100), step=st.floats(0.1, 50))
def test_a_cutover_step_never_sends_a_request_back(before: float, step: float) -> None:
    """Raising one weight only moves requests into that group; moving weight from old to new never moves a
    request out of new nor into old."""
    w0 = {"old": 100.0 - before, "new": before, "blue": 10.0}
    raised = dict(w0, new=before + step)
    shifted = dict(raised, old=max(0.0, 100.0 - before - step))
    for rid in IDS[:300]:
        a, b, c = pick_upstream(rid, w0), pick_upstream(rid, raised), pick_upstream(rid, shifted)
        assert a == b or b == "new"
        assert not (a == "new" and c != "new") and not (a != "old" and c == "old")


def test_mirror_percentage_is_honoured_and_independent_of_the_split() -> None:
    mirrored = [i for i in IDS if should_mirror(i, 5.0)]
    assert abs(len(mirrored) / len(IDS) - 0.05) < 0.005
    split = Counter(pick_upstream(i, {"a": 1.0, "b": 1.0}) for i in mirrored)
    assert abs(split["a"] / len(mirrored) - 0.5) < 0.05
    cfg = parse_upstreams({"weights": {"a": 1}, "mirror": {"to": "shadow", "percent": 100}})
    assert mirror_target("x", cfg) == "shadow"
    assert not should_mirror("x", 0.0)


def test_policy_routes_inside_the_chosen_upstream_and_falls_back_when_it_is_down() -> None:
    policy = build_policy({"preset": "least_load", "upstreams": {"weights": {"old": 50, "new": 50}}})
    backends = [Backend("o1", upstream="old"), Backend("o2", upstream="old"), Backend("n1", upstream="new")]
    counts = Counter()
    for i in range(2000):
        d = policy.decide(snap(backends), request(f"r{i}"))
        assert (d.upstream == "new") == (d.backend_id == "n1")
        counts[d.upstream] += 1
    assert abs(counts["new"] / 2000 - 0.5) < 0.05
    down = [backends[0], backends[1], Backend("n1", upstream="new", ejected=True)]
    assert {policy.decide(snap(down), request(f"r{i}")).upstream for i in range(200)} == {"old"}


def test_shadow_backend_is_the_least_busy_routable_member_of_the_group() -> None:
    from infctl.router.policies.weights import shadow_backend
    from infctl.router.snapshot import Backend, BackendState, Snapshot

    backends = (
        Backend("s1", upstream="shadow"),
        Backend("s2", upstream="shadow"),
        Backend("s3", upstream="shadow", ejected=True),
        Backend("p", upstream="primary"),
    )
    states = {
        "s1": BackendState(inflight=3),
        "s2": BackendState(inflight=1),
        "s3": BackendState(),
        "p": BackendState(),
    }
    assert shadow_backend(Snapshot(backends, states), "shadow") == "s2"
    assert shadow_backend(Snapshot(backends, states), "nowhere") is None


def test_without_weights_groups_share_by_capacity_and_the_report_is_the_split() -> None:
    """The split the router applies is the one it reports, weights set or not (issue 18: with old and new
    backends and no weights, cutover status said 0% to new while the policy sent requests to both)."""
    from infctl.router.policies.weights import applied_weights

    backends = [
        Backend("o1", upstream="old"),
        Backend("o2", upstream="old", weight=2.0),
        Backend("n1", upstream="new"),
        Backend("p1", role="prefill", upstream="new"),  # lends prefill legs: no share of its own
        Backend("s1", upstream="shadow"),
    ]
    mirror = parse_upstreams({"mirror": {"to": "shadow", "percent": 10}})
    assert applied_weights(mirror, backends) == {"old": 3.0, "new": 1.0}
    assert applied_weights(None, backends[:2]) == {}  # one group: no split
    assert applied_weights(None, [backends[0], backends[3]]) == {}  # one group answers clients
    set_ = parse_upstreams({"weights": {"old": 1, "new": 0}})
    assert applied_weights(set_, backends) == {"old": 1.0, "new": 0.0}
    policy = build_policy({"preset": "least_load", "upstreams": {"mirror": {"to": "shadow", "percent": 10}}})
    counts: Counter[str] = Counter()
    for i in range(4000):
        d = policy.decide(snap(backends), request(f"r{i}"))
        assert d.upstream is not None and d.backend_id.startswith(d.upstream[0])
        counts[d.upstream] += 1
    assert chi_square(counts, {"old": 0.75, "new": 0.25}) < 10.8  # type: ignore[arg-type]


def test_without_weights_a_pd_pair_never_spans_two_systems() -> None:
    from infctl.router.policies.pd import pick_pd

    backends = [
        Backend("op", role="prefill", group="g", upstream="old"),
        Backend("od", role="decode", group="g", upstream="old"),
        Backend("np", role="prefill", group="g", upstream="new"),
        Backend("nd", role="decode", group="g", upstream="new"),
    ]
    seen = set()
    for i in range(300):
        d = pick_pd(snap(backends), request(f"r{i}", tokens=4096, blocks=256))
        assert d.prefill is None or d.prefill[0] == d.decode[0], (d.prefill, d.decode)
        seen.add(d.decode)
    assert seen == {"od", "nd"}
