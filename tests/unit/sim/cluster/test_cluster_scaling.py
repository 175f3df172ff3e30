"""The simulator's autoscaler reads the demand from the router's counters, as the daemon does."""

from __future__ import annotations

from typing import Any

import pytest

from infctl.autoscaler.settings import ForecastConfig, PolicyConfig, UnitConfig
from infctl.errors import ConfigError
from infctl.sim.cluster.config import AutoscaleSettings
from infctl.sim.cluster.fleet import Fleet
from infctl.sim.cluster.routing import SimRouter
from infctl.sim.cluster.scaling import Scaler
from infctl.sim.profiles import get_profile


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


def _restarting(memory: bool) -> dict[float, int]:
    """A forecasting policy on 3 idle engines, warm on a demand of 1 engine's prefill, restarted at t=100
    (gone 5 s) as the demand jumps to 5 engines' worth: the engines it asks for at each decision from 95."""
    fc = ForecastConfig(replica_prompt_tps=10_000.0, window_s=30.0, lead_s=0.0)
    policy = PolicyConfig(units=(UnitConfig("both", 1, 8),), ttft_slo_s=2.0, forecast=fc)
    settings = AutoscaleSettings(
        policy=policy, interval_s=5.0, restarts=(100.0,), restart_down_s=5.0, memory=memory
    )
    scaler, router = Scaler(settings), SimRouter("least_load")
    fleet = Fleet(get_profile("llama3-8b-h100"))
    for _ in range(3):
        fleet.add(0.0)
    asked = {}
    for t in range(0, 120, 5):
        router.reasons["least_load"] += 10
        router.prompt_tokens += 5 * (10_000 if t < 100 else 50_000)
        desired = scaler.decide(fleet, router, float(t))
        if t >= 95:
            asked[float(t)] = desired
    return asked


def test_a_restarted_daemon_with_its_memory_forecasts_at_once() -> None:
    # Gone at 100 (the count stays); at 105 the new daemon has no demand reading yet; from 110 the one with
    # its memory (a warm forecast: its level rises from 10k towards 50k tok/s) asks for 4, the cold one
    # only reacts (its engines are idle) until it has a whole window of readings.
    warm, cold = _restarting(memory=True), _restarting(memory=False)
    assert warm == {95.0: 3, 100.0: 3, 105.0: 3, 110.0: 4, 115.0: 4}
    assert cold == {95.0: 3, 100.0: 3, 105.0: 3, 110.0: 3, 115.0: 3}


@pytest.mark.parametrize("fields", [{"restarts": (-1.0,)}, {"restart_down_s": -5.0}])
def test_restarts_before_the_run_or_negative_downtime_are_refused(fields: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match="restart"):
        AutoscaleSettings(**fields)
