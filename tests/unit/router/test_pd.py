"""Prefill/decode pairing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from routerkit import backends_and_states, fresh, matches_for, request, snap

from infctl.errors import ConfigError
from infctl.router import Backend, NoBackendError, PDSettings, Snapshot, pick_pd
from infctl.router.policies.pd import PDDecision
from infctl.router.policies.weights import UpstreamConfig

GROUPS = [
    Backend("p0", role="prefill", group="g0"),
    Backend("d0", role="decode", group="g0", decode_can_prefill=False),
    Backend("p1", role="prefill", group="g1"),
    Backend("p1b", role="prefill", group="g1"),
    Backend("d1", role="decode", group="g1", decode_can_prefill=False),
]


def test_group_mode_follows_the_prefill_cache() -> None:
    d = pick_pd(snap(GROUPS), request(blocks=200), matches={"p1b": 180})
    assert (d.decode, d.prefill, d.reason, d.group) == ("d1", "p1b", "disaggregated", "g1")


def test_group_mode_picks_the_least_loaded_prefill_of_the_group() -> None:
    states = {b.id: fresh() for b in GROUPS} | {"p1": fresh(queued_tokens=8000)}
    states["d0"] = fresh(inflight_tokens=900_000)
    d = pick_pd(snap(GROUPS, states), request(blocks=200))
    assert (d.decode, d.prefill) == ("d1", "p1b")


def test_decode_load_can_outweigh_prefix() -> None:
    states = {b.id: fresh() for b in GROUPS} | {"d1": fresh(inflight_tokens=2_000_000)}
    d = pick_pd(snap(GROUPS, states), request(blocks=200), matches={"p1": 100})
    assert d.decode == "d0" and d.prefill == "p0"


def test_short_uncached_prompt_is_not_disaggregated() -> None:
    backends = [Backend("p", role="prefill"), Backend("d", role="decode")]
    d = pick_pd(snap(backends), request(tokens=300))
    assert (d.decode, d.prefill, d.reason) == ("d", None, "local_prefill")
    cached = pick_pd(snap(backends), request(blocks=100), matches={"d": 90})  # 160 tokens uncached
    assert cached.prefill is None
    long = pick_pd(snap(backends), request(blocks=100))
    assert (long.prefill, long.reason) == ("p", "disaggregated")
    never = pick_pd(snap(backends), request(blocks=100), pd=PDSettings(min_uncached_tokens=10_000))
    assert never.prefill is None


def test_a_capable_both_backend_takes_short_requests_whole() -> None:
    backends = [
        Backend("p", role="prefill"),
        Backend("d", role="decode", decode_can_prefill=False),
        Backend("x"),
    ]
    d = pick_pd(snap(backends), request(tokens=100))
    assert (d.decode, d.prefill) == ("x", None)


def test_decode_that_cannot_prefill_always_gets_a_prefill() -> None:
    backends = [Backend("p", role="prefill"), Backend("d", role="decode", decode_can_prefill=False)]
    assert pick_pd(snap(backends), request(tokens=10)).prefill == "p"


def test_no_prefill_backend_falls_back_to_local_prefill() -> None:
    backends = [Backend("p", role="prefill", ejected=True), Backend("d", role="decode")]
    d = pick_pd(snap(backends), request(blocks=100))
    assert (d.prefill, d.reason) == (None, "no_prefill_backend")


def test_errors_when_nothing_can_serve() -> None:
    with pytest.raises(NoBackendError) as err:
        pick_pd(snap([Backend("p", role="prefill")]), request())
    assert err.value.reason == "no_decode"
    with pytest.raises(NoBackendError) as err:
        pick_pd(snap([Backend("d", role="decode", decode_can_prefill=False)]), request(blocks=100))
    assert err.value.reason == "no_prefill"


def test_pool_mode_chooses_each_side_on_its_own() -> None:
    d = pick_pd(snap(GROUPS), request(blocks=200), matches={"p0": 150}, pd=PDSettings(mode="pool"))
    assert d.prefill == "p0"
    states = {b.id: fresh() for b in GROUPS} | {"d0": fresh(inflight_tokens=500_000)}
    d = pick_pd(snap(GROUPS, states), request(blocks=200), matches={"p0": 150}, pd=PDSettings(mode="pool"))
    assert (d.decode, d.prefill) == ("d1", "p0")


def test_data_parallel_ranks_are_separate_targets() -> None:
    ranks = [Backend(f"http://e:8000#dp{r}", role="both", dp_rank=r) for r in range(4)]
    states = {b.id: fresh(inflight_tokens=100_000) for b in ranks} | {"http://e:8000#dp2": fresh()}
    d = pick_pd(snap(ranks, states), request(tokens=100))
    assert d.decode == "http://e:8000#dp2"


def _valid(snapshot: Snapshot, d: PDDecision, mode: str) -> None:
    dec = snapshot.by_id[d.decode]
    assert dec.routable and dec.role in ("decode", "both")
    if d.prefill is not None:
        pre = snapshot.by_id[d.prefill]
        assert pre.routable and pre.role == "prefill"  # an aggregated engine is never a prefill leg
        if mode == "group":
            assert pre.group == dec.group


@settings(max_examples=300, deadline=None)
@given(data=st.data(), mode=st.sampled_from(["group", "pool"]))
def test_pairs_are_live_and_in_one_group(data: st.DataObject, mode: str) -> None:
    snapshot = data.draw(backends_and_states(max_size=12))
    req = request(blocks=data.draw(st.integers(0, 128)))
    matches = data.draw(matches_for(snapshot, req))
    try:
        d = pick_pd(snapshot, req, matches=matches, pd=PDSettings(mode=mode))  # type: ignore[arg-type]
    except NoBackendError:
        return
    _valid(snapshot, d, mode)


def _cutover_pairs() -> list[Backend]:
    # Pool mode: each side chosen on its own, so only the upstream split keeps a pair inside one system.
    return [Backend(f"{u}-{r}", role=r, upstream=u, decode_can_prefill=False)
            for u in ("old", "new") for r in ("prefill", "decode")]  # fmt: skip


def test_a_weighted_split_keeps_both_legs_of_a_pair_in_the_requests_upstream_group() -> None:
    backends, pd = _cutover_pairs(), PDSettings(mode="pool")
    # The new system's prefill engine is idle and the old one's busy: unconstrained, pool mode would mix them.
    states = {b.id: fresh() for b in backends} | {"old-prefill": fresh(queued_tokens=50_000)}
    seen = {"old": 0, "new": 0}
    for i in range(400):
        d = pick_pd(snap(backends, states), request(f"r{i}", blocks=100), pd=pd,
                    upstreams=UpstreamConfig(weights={"old": 3, "new": 1}))  # fmt: skip
        assert d.prefill is not None and d.prefill.split("-")[0] == d.decode.split("-")[0], d
        seen[d.decode.split("-")[0]] += 1
    assert 250 < seen["old"] < 350  # ~3:1, the weights' split


def test_a_group_without_a_decode_backend_passes_its_share_to_the_others() -> None:
    backends = [b for b in _cutover_pairs() if b.id != "new-decode"]
    for i in range(50):
        d = pick_pd(snap(backends), request(f"r{i}", blocks=100), pd=PDSettings(mode="pool"),
                    upstreams=UpstreamConfig(weights={"old": 1, "new": 1}))  # fmt: skip
        assert (d.decode, d.prefill) == ("old-decode", "old-prefill")


# Pool mode, prefill on p0 (it holds the prefix): 3,200 tokens cross the spine to d1, costing
# 0.108 x 3,200 = 346 prefill tokens; a decode backend's in-flight tokens weigh 0.1 each.
POOL = PDSettings(mode="pool")


def _pool_pick(d0_inflight: int, pd: PDSettings = POOL, backends: list[Backend] = GROUPS) -> PDDecision:
    states = {b.id: fresh() for b in backends} | {"d0": fresh(inflight_tokens=d0_inflight)}
    return pick_pd(snap(backends, states), request(blocks=200), matches={"p0": 150}, pd=pd)


def test_pool_mode_prefers_the_prefills_group_when_the_link_costs_more_than_the_load_gap() -> None:
    d = _pool_pick(2_000)  # d0 costs 200 more in load, d1 346 more in transfer
    assert (d.decode, d.prefill, d.group) == ("d0", "p0", "g0")
    assert d.costs["d1"] - d.costs["d0"] == pytest.approx(0.108 * 3_200 - 0.1 * 2_000)


def test_pool_mode_a_much_less_loaded_decoder_across_groups_still_wins() -> None:
    d = _pool_pick(5_000)  # 500 tokens of load gap > 346 of transfer
    assert (d.decode, d.prefill) == ("d1", "p0")


def test_a_zero_cross_group_cost_chooses_the_decoder_regardless_of_the_link() -> None:
    d = _pool_pick(2_000, PDSettings(mode="pool", cross_group_cost=0.0))
    assert (d.decode, d.prefill) == ("d1", "p0")
    assert d.costs["d0"] - d.costs["d1"] == pytest.approx(0.1 * 2_000)


def test_the_cross_group_cost_counts_only_the_tokens_the_decoder_must_receive() -> None:
    # d1 caches 180 of the 200 blocks: only 320 tokens cross (35 prefill tokens), less than d0's 200.
    states = {b.id: fresh() for b in GROUPS} | {"d0": fresh(inflight_tokens=2_000)}
    d = pick_pd(snap(GROUPS, states), request(blocks=200), matches={"p0": 150, "d1": 180}, pd=POOL)
    assert (d.decode, d.prefill) == ("d1", "p0")


def test_the_cross_group_cost_needs_both_groups_and_a_transfer() -> None:
    ungrouped = [Backend(b.id, role=b.role, decode_can_prefill=False) for b in GROUPS]
    assert _pool_pick(2_000, backends=ungrouped).decode == "d1"  # no groups: no link to price
    # d1 prefills a short prompt itself: nothing crosses, so nothing is added to its cost.
    local = [b for b in GROUPS if b.id != "d1"] + [Backend("d1", role="decode", group="g1")]
    states = {b.id: fresh() for b in local} | {"d0": fresh(inflight_tokens=2_000)}
    d = pick_pd(snap(local, states), request(tokens=400), pd=PDSettings(mode="pool", cross_group_cost=100.0))
    assert (d.decode, d.prefill, d.reason) == ("d1", None, "local_prefill")


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_group_mode_ignores_the_cross_group_cost(data: st.DataObject) -> None:
    snapshot = data.draw(backends_and_states(max_size=12))
    req = request(blocks=data.draw(st.integers(0, 128)))
    matches = data.draw(matches_for(snapshot, req))
    try:
        free = pick_pd(snapshot, req, matches=matches, pd=PDSettings(cross_group_cost=0.0))
    except NoBackendError:
        return
    costly = pick_pd(snapshot, req, matches=matches, pd=PDSettings(cross_group_cost=1_000.0))
    assert costly == free


@pytest.mark.parametrize("bad", [-0.1, float("nan")])
def test_a_negative_cross_group_cost_is_refused(bad: float) -> None:
    with pytest.raises(ConfigError, match="cross_group_cost"):
        PDSettings(mode="pool", cross_group_cost=bad)


@st.composite
def pd_fleets(draw: st.DrawFn) -> Snapshot:
    """Random PD fleets in which some decode engines cannot serve a request alone (SGLang's)."""
    n = draw(st.integers(1, 8))
    backends = [
        Backend(
            f"b{i}",
            role=draw(st.sampled_from(["prefill", "decode", "decode", "both"])),
            group=draw(st.sampled_from(["g0", "g1", None])),
            decode_can_prefill=draw(st.booleans()),
            healthy=draw(st.integers(0, 5)) > 0,
            draining=draw(st.integers(0, 5)) == 0,
        )
        for i in range(n)
    ]
    states = {b.id: fresh(inflight_tokens=draw(st.floats(0, 1e6))) for b in backends}
    return snap(backends, states)


@settings(max_examples=400, deadline=None)
@given(
    data=st.data(),
    mode=st.sampled_from(["group", "pool"]),
    threshold=st.sampled_from([0, 16, 512, 100_000]),
    tokens=st.integers(1, 4096),
)
def test_a_decode_that_cannot_prefill_never_gets_a_request_alone(
    data: st.DataObject, mode: str, threshold: int, tokens: int
) -> None:
    snapshot = data.draw(pd_fleets())
    req = request(tokens=tokens, blocks=tokens // 16)
    matches = data.draw(matches_for(snapshot, req))
    pd = PDSettings(mode=mode, min_uncached_tokens=threshold)  # type: ignore[arg-type]
    try:
        d = pick_pd(snapshot, req, matches=matches, pd=pd)
    except NoBackendError:
        # Only when nothing could take the request whole or paired: an aggregated engine always could.
        assert not any(b.routable and b.role == "both" for b in snapshot.backends)
        return
    dec = snapshot.by_id[d.decode]
    if d.prefill is None:
        assert dec.role == "both" or dec.decode_can_prefill, d
    _valid(snapshot, d, mode)
