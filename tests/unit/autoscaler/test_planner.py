"""The planner: a GPU budget divided among pools by demand (bounds and budget always held, minimax load)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infctl.autoscaler.planner import PoolDemand, fit_budget, plan_pools
from infctl.errors import ConfigError


def pool(name: str, prompt: float, decode: float = 0.0, **kw: object) -> PoolDemand:
    return PoolDemand(name, prompt, decode, replica_prefill_tps=1000.0, replica_decode_tps=100.0, **kw)  # type: ignore[arg-type]


@st.composite
def pools(draw: st.DrawFn) -> list[PoolDemand]:
    out = []
    for i in range(draw(st.integers(1, 4))):
        lo = draw(st.integers(0, 3))
        hi = draw(st.one_of(st.none(), st.integers(lo, lo + 6)))
        out.append(
            PoolDemand(
                f"p{i}",
                prompt_tps=draw(st.floats(0, 1e6)),
                decode_tps=draw(st.floats(0, 1e5)),
                replica_prefill_tps=draw(st.floats(1, 1e5)),
                replica_decode_tps=draw(st.floats(1, 1e4)),
                gpus_per_replica=draw(st.sampled_from([1, 2, 8])),
                min=lo,
                max=hi,
            )
        )
    return out


@given(pools(), st.integers(0, 64))
def test_the_plan_keeps_bounds_and_budget(ps: list[PoolDemand], budget: int) -> None:
    floor = sum(p.min * p.gpus_per_replica for p in ps)
    if floor > budget:
        with pytest.raises(ConfigError):
            plan_pools(ps, budget)
        return
    plan = plan_pools(ps, budget)
    counts = plan.counts()
    assert plan.gpus == sum(counts[p.name] * p.gpus_per_replica for p in ps) <= budget
    for p in ps:
        assert p.min <= counts[p.name] and (p.max is None or counts[p.name] <= p.max)
    # Nothing left that a pool with work could still take.
    for p in ps:
        if p.load > 0 and (p.max is None or counts[p.name] < p.max):
            assert plan.gpus + p.gpus_per_replica > budget


@settings(deadline=None)
@given(st.lists(st.floats(0.01, 100), min_size=1, max_size=3), st.integers(3, 12))
def test_one_gpu_pools_get_the_least_busiest_split(loads: list[float], budget: int) -> None:
    ps = [pool(f"p{i}", load * 1000.0) for i, load in enumerate(loads)]
    if budget < len(ps):
        return
    plan = plan_pools(ps, budget)
    busiest = max(u for _, u in plan.utilization)
    best = min(
        max(load / n for load, n in zip(loads, split, strict=True))
        for split in itertools.product(range(1, budget + 1), repeat=len(loads))
        if sum(split) <= budget
    )
    assert busiest == pytest.approx(best)


def test_replicas_follow_demand_prompt_and_decode() -> None:
    # short: 1.2 replicas' worth of prefill + 1 of decode; long: 3.6 of prefill.
    plan = plan_pools([pool("short", 1200, 100), pool("long", 3600)], 8)
    assert plan.counts() == {"short": 3, "long": 5}
    assert plan.utilization == (("short", pytest.approx(2.2 / 3)), ("long", pytest.approx(3.6 / 5)))
    # Five replicas' worth of decoding more moves engines to the short pool.
    assert plan_pools([pool("short", 1200, 600), pool("long", 3600)], 8).counts() == {"short": 5, "long": 3}


def test_a_pool_without_demand_keeps_its_minimum() -> None:
    plan = plan_pools([pool("idle", 0, min=0), pool("busy", 500)], 6)
    assert plan.counts() == {"idle": 0, "busy": 6}


def test_minimums_over_the_budget_and_repeated_names_are_refused() -> None:
    with pytest.raises(ConfigError, match="minimums need 16 GPUs"):
        plan_pools([pool("a", 1, min=2, gpus_per_replica=8)], 8)
    with pytest.raises(ConfigError, match="repeat"):
        plan_pools([pool("a", 1), pool("a", 2)], 8)
    with pytest.raises(ConfigError, match="finite"):
        pool("a", float("nan"))


@given(
    st.dictionaries(st.sampled_from(["a", "b", "c"]), st.integers(1, 10), min_size=1),
    st.integers(3, 40),
    st.sampled_from([1, 2]),
)
def test_fit_budget_never_gives_more_than_wanted(wanted: dict[str, int], budget: int, gpus: int) -> None:
    ps = [pool(n, 0.0, gpus_per_replica=gpus, min=1) for n in wanted]
    if len(ps) * gpus > budget:
        return
    got = fit_budget(wanted, {n: float(k) for n, k in wanted.items()}, ps, budget)
    assert all(1 <= got[n] <= wanted[n] for n in wanted)
    assert sum(got.values()) * gpus <= max(budget, sum(wanted.values()) * gpus)
    if sum(wanted.values()) * gpus <= budget:
        assert got == wanted
    else:
        assert sum(got.values()) * gpus <= budget
