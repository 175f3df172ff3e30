"""RouterCore: the learned state around the pure policy (speculative entries, the auto index's merge)."""

from __future__ import annotations

from routerkit import fresh

from infctl.router import Backend, RequestInfo, RouterCore, Snapshot, build_policy
from infctl.sim.types import BlockStored

BACKENDS = tuple(Backend(f"e{i}") for i in range(4))
IDLE = {b.id: fresh() for b in BACKENDS}


def burst_request(i: int) -> RequestInfo:
    return RequestInfo(f"r{i}", prompt_tokens=16 * 130, block_hashes=(*range(128), 9000 + i, 9100 + i))


def spread(ttl: float) -> set[str]:
    """Backends a burst of 8 same-prefix requests lands on, all routed before any KV event arrives."""
    core = RouterCore(build_policy({"preset": "cache_aware", "index": "precise",
                                    "settings": {"speculative_ttl_s": ttl}}))  # fmt: skip
    return {core.route(Snapshot(BACKENDS, IDLE, now=0.01 * i), burst_request(i)).backend_id for i in range(8)}


def test_speculation_keeps_a_burst_on_one_backend_until_events_arrive() -> None:
    assert len(spread(2.0)) == 1
    assert len(spread(0.0)) > 1  # without it every request looks uncached everywhere and ties scatter


def test_an_unconfirmed_guess_expires_and_an_event_makes_it_stick() -> None:
    core = RouterCore(build_policy({"preset": "prefix_precise", "settings": {"speculative_ttl_s": 1.0}}))
    first = core.route(Snapshot(BACKENDS, IDLE, now=0.0), burst_request(0)).backend_id
    assert core.matches(burst_request(1), now=0.5) == {first: 128}
    assert core.matches(burst_request(1), now=1.0) == {}  # the engine never said it stored them
    core.route(Snapshot(BACKENDS, IDLE, now=2.0), burst_request(2))
    chosen = core.route(Snapshot(BACKENDS, IDLE, now=2.0), burst_request(3)).backend_id
    core.apply_kv_events(chosen, 1, [BlockStored(list(range(128)), None, [], 16)])
    assert core.matches(burst_request(4), now=100.0) == {chosen: 128}


def test_the_approximate_index_is_untouched_by_precise_policies() -> None:
    core = RouterCore(build_policy({"preset": "cache_aware", "index": "precise"}))
    core.route(Snapshot(BACKENDS, IDLE, now=0.0), burst_request(0))
    assert all(core.approx.size(b.id) == 0 for b in BACKENDS)


def test_auto_takes_the_deeper_of_what_events_report_and_what_the_router_sent() -> None:
    core = RouterCore(
        build_policy({"preset": "cache_aware", "index": "auto", "settings": {"speculative_ttl_s": 0}})
    )
    prefix = tuple(range(64))
    core.approx.record("e0", prefix)
    probe = RequestInfo("p", prompt_tokens=16 * 64, block_hashes=prefix)
    assert core.matches(probe) == {"e0": 64}  # no events yet: the approximate index alone
    # e1 cached the prefix for another router replica; e0 evicted most of it: e0 keeps its home (the
    # router's record) and e1 shows up (the events).
    core.apply_kv_events("e1", 1, [BlockStored(list(prefix), None, [], 16)])
    core.apply_kv_events("e0", 1, [BlockStored(list(prefix[:10]), None, [], 16)])
    assert core.matches(probe) == {"e0": 64, "e1": 64}
    core.forget("e0")
    core.forget("e1")
    assert core.matches(probe) == {}


def test_auto_without_events_decides_like_the_approximate_index() -> None:
    auto, approx = (
        RouterCore(build_policy({"preset": "cache_aware", "index": "auto"})),
        RouterCore(build_policy("cache_aware")),
    )
    for i in range(40):
        req = RequestInfo(f"r{i}", prompt_tokens=16 * 40, block_hashes=tuple(range(i % 5, i % 5 + 40)))
        snap = Snapshot(
            BACKENDS, {b.id: fresh(inflight=(i * (k + 1)) % 4) for k, b in enumerate(BACKENDS)}, i
        )
        assert auto.route(snap, req).backend_id == approx.route(snap, req).backend_id


def test_learns_says_whether_learn_would_record_anything() -> None:
    """The proxy defers ``learn`` to a later loop turn only when it would do something."""
    snap = Snapshot(BACKENDS, IDLE, now=0.0)
    for policy, expected in (("round_robin", False), ("cache_aware", True), ("prefix_precise", True)):
        core = RouterCore(build_policy(policy))
        request = burst_request(0)
        assert core.learns(request) is expected
        assert not core.learns(RequestInfo("short", prompt_tokens=8))  # no full block to record
        core.learn(snap, request, "e1")
        assert (core.matches(burst_request(1), now=0.0).get("e1", 0) > 0) is expected


def test_an_estimated_request_teaches_the_approximate_index_only() -> None:
    # The precise index is keyed on the model's ids: an estimate's pseudo-ids would be a guess about blocks
    # no engine will ever report.
    core = RouterCore(
        build_policy({"preset": "cache_aware", "index": "auto", "settings": {"speculative_ttl_s": 5}})
    )
    guess = RequestInfo("g", prompt_tokens=16 * 64, block_hashes=tuple(range(64)), estimated=True)
    chosen = core.route(Snapshot(BACKENDS, IDLE, now=0.0), guess).backend_id
    assert core.approx.size(chosen) > 0
    assert core.precise.match(guess.block_hashes) == {}
    exact = RequestInfo("x", prompt_tokens=16 * 64, block_hashes=tuple(range(64)))
    assert core.precise.match(exact.block_hashes) == {}
    chosen = core.route(Snapshot(BACKENDS, IDLE, now=0.0), exact).backend_id
    assert core.precise.match(exact.block_hashes) == {chosen: 64}
