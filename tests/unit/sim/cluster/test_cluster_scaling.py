"""The simulator's autoscaler reads the demand from the router's counters, as the daemon does."""

from __future__ import annotations

import pytest

from infctl.sim.cluster.config import AutoscaleSettings
from infctl.sim.cluster.routing import SimRouter
from infctl.sim.cluster.scaling import Scaler


def test_demand_is_the_rate_of_uncached_prompt_tokens_routed() -> None:
    router, scaler = SimRouter("least_load"), Scaler(AutoscaleSettings())
    assert scaler.demand(router, 10.0) is None  # the first reading has nothing to difference
    router.reasons["least_load"] += 30
    router.prompt_tokens += 60_000
    router.matched_tokens += 20_000
    demand = scaler.demand(router, 20.0)
    assert demand is not None
    assert demand.requests_per_s == pytest.approx(3.0) and demand.prompt_tps == pytest.approx(4000.0)
    assert scaler.demand(router, 30.0) == type(demand)(0.0, 0.0)
