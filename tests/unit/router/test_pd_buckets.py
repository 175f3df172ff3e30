"""PD pairing with length buckets: both legs come from the request's length pool (a deployment's
``length_pools`` in pool or group mode), spilling or falling back only as buckets do."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from routerkit import fresh, request, snap

from infctl.router import Backend, PDSettings, pick_pd
from infctl.router.policies.buckets import parse_buckets

BUCKETS = parse_buckets(
    [{"name": "short", "max_tokens": 2048, "pools": ["short"]}, {"name": "long", "pools": ["long"]}]
)
POOL_PD = PDSettings(mode="pool", min_uncached_tokens=0)
POOLS = [
    Backend("sp", role="prefill", pool="short", group="short-g0"),
    Backend("sd", role="decode", pool="short", group="short-g0", decode_can_prefill=False),
    Backend("lp", role="prefill", pool="long", group="long-g0"),
    Backend("ld", role="decode", pool="long", group="long-g0", decode_can_prefill=False),
]


def test_each_prompt_pairs_inside_its_pool() -> None:
    # The long pool is idle and the short one loaded: without buckets the short prompt would go long.
    states = {b.id: fresh() for b in POOLS} | {"sd": fresh(inflight_tokens=50_000)}
    for mode in ("pool", "group"):
        pd = PDSettings(mode=mode, min_uncached_tokens=0)
        short = pick_pd(snap(POOLS, states), request(tokens=1500), pd=pd, buckets=BUCKETS)
        assert (short.prefill, short.decode) == ("sp", "sd")
        long = pick_pd(snap(POOLS, states), request(tokens=9000), pd=pd, buckets=BUCKETS)
        assert (long.prefill, long.decode) == ("lp", "ld")
        unbucketed = pick_pd(snap(POOLS, states), request(tokens=1500), pd=pd)
        assert unbucketed.decode == "ld"


def test_a_saturated_short_pool_spills_to_the_long_one_with_its_prefill() -> None:
    states = {b.id: fresh() for b in POOLS} | {"sd": fresh(queue=50)}
    d = pick_pd(snap(POOLS, states), request(tokens=1500), pd=POOL_PD, buckets=BUCKETS)
    assert (d.prefill, d.decode) == ("lp", "ld")


def test_a_pool_without_a_prefill_engine_borrows_one_rather_than_failing() -> None:
    backends = [b for b in POOLS if b.id != "sp"]
    d = pick_pd(snap(backends), request(tokens=1500), pd=POOL_PD, buckets=BUCKETS)
    assert (d.prefill, d.decode) == ("lp", "sd")


@settings(max_examples=60, deadline=None)
@given(tokens=st.integers(0, 20_000), loads=st.lists(st.integers(0, 10_000), min_size=4, max_size=4))
def test_below_saturation_both_legs_stay_in_the_bucket(tokens: int, loads: list[int]) -> None:
    states = {b.id: fresh(inflight_tokens=x) for b, x in zip(POOLS, loads, strict=True)}
    d = pick_pd(snap(POOLS, states), request(tokens=tokens), pd=POOL_PD, buckets=BUCKETS)
    pool = "short" if tokens <= 2048 else "long"
    assert d.decode[0] == pool[0] and (d.prefill is None or d.prefill[0] == pool[0])
