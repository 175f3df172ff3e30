"""Length pools sized by the planner from the traffic's demand (the bucketing comparison's split)."""

from __future__ import annotations

import pytest

from infctl.bench.workloads import LengthDist, MixComponent, MixtureSpec
from infctl.sim.cluster.scenarios import SCENARIOS, ScenarioSize
from infctl.sim.cluster.scenarios.catalog import DEEPSEEK_V3_H200
from infctl.sim.cluster.scenarios.pools import Bucket, bucket_demand, decode_rate, planned_pools, prefill_rate

P = DEEPSEEK_V3_H200


def mix(short_out: int, long_weight: float = 0.1) -> MixtureSpec:
    return MixtureSpec(
        components=[
            MixComponent(
                name="s",
                weight=1 - long_weight,
                input=LengthDist(mean=500),
                output=LengthDist(mean=short_out),
            ),
            MixComponent(
                name="l", weight=long_weight, input=LengthDist(mean=16_000), output=LengthDist(mean=64)
            ),
        ]
    )


def test_decode_capacity_is_counted_at_the_itl_objective() -> None:
    rate = decode_rate(P, 4000, itl_s=0.05)
    batch = round(rate * 0.05)
    assert P.step_time(0, batch, batch * 4000) <= 0.05 + 1e-9
    assert P.step_time(0, batch + 2, (batch + 2) * 4000) > 0.05
    assert decode_rate(P, 600) > decode_rate(P, 16_000)  # long contexts read more KV per step
    assert decode_rate(P, 4000, itl_s=0.001) == pytest.approx(1 / P.step_time(0, 1, 4000))


def test_demand_is_measured_per_bucket() -> None:
    buckets = [Bucket("short", 2048), Bucket("long", None)]
    short, long_ = bucket_demand(mix(128), (400, 0), buckets, 10.0, P)
    assert short.prompt_tps == pytest.approx(9 * 500, rel=0.15) and long_.prompt_tps == pytest.approx(
        16_000, rel=0.2
    )
    assert short.decode_tps == pytest.approx(9 * 128, rel=0.15)
    assert short.replica_prefill_tps == long_.replica_prefill_tps == prefill_rate(P)
    # More decoding in the short bucket moves engines to it.
    few, _ = planned_pools(bucket_demand(mix(16), (400, 0), buckets, 150.0, P), 8)
    many, _ = planned_pools(bucket_demand(mix(2048), (400, 0), buckets, 150.0, P), 8)
    assert few.count("short") < many.count("short")
    assert few == sorted(few, key=["short", "long"].index)


def test_the_bucketing_comparison_takes_the_planners_split() -> None:
    sc = SCENARIOS["bucketing"](ScenarioSize(requests=400))
    pools = list(sc.arms[1].pools)
    assert len(pools) == 8 and {"short", "long"} == set(pools)
    assert sc.arms[1].label == f"buckets ({pools.count('short')} short + {pools.count('long')} long)"
    assert "pools by the planner" in sc.notes
