"""The seed's comparisons on the cluster simulator: ``infctl simulate compare``.

    outcome = run_scenario(SCENARIOS["prefix"](ScenarioSize(engines=8, requests=2000)))
    scenario_rows(outcome)          # (measure, arm figures..., change, seed reported)
    outcome.to_dict()               # the figures plus every arm's result in the bench schema

Modules: ``model`` (scenario, arm, measure, the table), ``measures`` (figures read from a result),
``catalog`` (length bucketing, prefix-aware routing on shared prefixes and on the Mooncake trace),
``capacity`` (autoscaling on a diurnal day, a second KV tier), ``diurnal`` (the day as load stages),
``disagg`` (aggregated vs Group- and Pool-mode PD), ``pools`` (engines placed in pools for bucketing).
"""

from collections.abc import Callable

from infctl.errors import ConfigError
from infctl.sim.cluster.scenarios.capacity import autoscaling, kv_tier
from infctl.sim.cluster.scenarios.catalog import ScenarioSize, bucketing, prefix_mooncake, prefix_shared
from infctl.sim.cluster.scenarios.disagg import pd_scenario
from infctl.sim.cluster.scenarios.model import (
    Measure,
    ScenarioOutcome,
    SimArm,
    SimScenario,
    columns,
    run_scenario,
    scenario_rows,
)

SCENARIOS: dict[str, Callable[[ScenarioSize], SimScenario]] = {
    "bucketing": bucketing,
    "prefix": prefix_shared,
    "prefix-mooncake": prefix_mooncake,
    "autoscaling": autoscaling,
    "kv-tier": kv_tier,
    "pd": pd_scenario,
}
"""Name -> builder, in the order ``compare`` runs them."""


def build_scenarios(names: list[str], size: ScenarioSize) -> list[SimScenario]:
    """The named scenarios (all when ``names`` is empty), validated before anything runs."""
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        raise ConfigError(
            f"unknown scenario(s): {', '.join(unknown)}", hint=f"pick from: {', '.join(SCENARIOS)}"
        )
    return [SCENARIOS[n](size) for n in (names or list(SCENARIOS))]


__all__ = [
    "SCENARIOS",
    "Measure",
    "ScenarioOutcome",
    "ScenarioSize",
    "SimArm",
    "SimScenario",
    "build_scenarios",
    "columns",
    "run_scenario",
    "scenario_rows",
]
