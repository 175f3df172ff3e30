"""The seed's comparisons on the cluster simulator: ``infctl simulate compare``.

    outcome = run_scenario(SCENARIOS["prefix"](ScenarioSize(engines=8, requests=2000)))
    scenario_rows(outcome)          # (measure, arm figures..., change, seed reported)
    outcome.to_dict()               # the figures plus every arm's result in the bench schema

Modules: ``model`` (scenario, arm, measure, the table), ``measures`` (figures read from a result),
``catalog`` (length bucketing, prefix-aware routing on shared prefixes and on the Mooncake trace),
``autoscaling`` (static vs three autoscalers over a business, a consumer and a spiky day), ``capacity`` (a
second KV tier), ``diurnal`` (the day as load stages), ``disagg`` (aggregated vs Group- and Pool-mode PD),
``pools`` (length pools sized by the autoscaler's planner for bucketing), ``zero`` (scale-to-zero over a day
with a night of no traffic), ``seeds`` (one comparison at several seeds: means, ranges, wins per seed).
"""

from collections.abc import Callable

from infctl.errors import ConfigError
from infctl.sim.cluster.scenarios.autoscaling import (
    autoscaling_business,
    autoscaling_consumer,
    autoscaling_spiky,
)
from infctl.sim.cluster.scenarios.capacity import kv_tier
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
from infctl.sim.cluster.scenarios.seeds import SeededOutcome, run_seeded, seeded_rows, verdicts
from infctl.sim.cluster.scenarios.zero import scale_to_zero

SCENARIOS: dict[str, Callable[[ScenarioSize], SimScenario]] = {
    "bucketing": bucketing,
    "prefix": prefix_shared,
    "prefix-mooncake": prefix_mooncake,
    "autoscaling-business": autoscaling_business,
    "autoscaling-consumer": autoscaling_consumer,
    "autoscaling-spiky": autoscaling_spiky,
    "kv-tier": kv_tier,
    "pd": pd_scenario,
    "scale-to-zero": scale_to_zero,
}
"""Name -> builder, in the order ``compare`` runs them."""
GROUPS: dict[str, tuple[str, ...]] = {
    "autoscaling": ("autoscaling-business", "autoscaling-consumer", "autoscaling-spiky"),
}
"""A name that runs several scenarios (``compare autoscaling``: every day)."""


def build_scenarios(names: list[str], size: ScenarioSize) -> list[SimScenario]:
    """The named scenarios (all when ``names`` is empty; a group name: its members), validated before
    anything runs."""
    unknown = [n for n in names if n not in SCENARIOS and n not in GROUPS]
    if unknown:
        known = ", ".join([*GROUPS, *SCENARIOS])
        raise ConfigError(f"unknown scenario(s): {', '.join(unknown)}", hint=f"pick from: {known}")
    picked = [m for n in names for m in GROUPS.get(n, (n,))] or list(SCENARIOS)
    return [SCENARIOS[n](size) for n in dict.fromkeys(picked)]


__all__ = [
    "GROUPS",
    "SCENARIOS",
    "Measure",
    "ScenarioOutcome",
    "ScenarioSize",
    "SeededOutcome",
    "SimArm",
    "SimScenario",
    "build_scenarios",
    "columns",
    "run_scenario",
    "run_seeded",
    "scenario_rows",
    "seeded_rows",
    "verdicts",
]
