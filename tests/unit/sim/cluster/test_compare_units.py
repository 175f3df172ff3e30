"""``simulate compare -o json`` labels each measure with the unit of the number it carries."""

from __future__ import annotations

from typing import Any, cast

from infctl.sim.cluster.result import SimResult
from infctl.sim.cluster.scenarios import build_scenarios
from infctl.sim.cluster.scenarios.catalog import ScenarioSize
from infctl.sim.cluster.scenarios.model import Measure, ScenarioOutcome, SimArm, SimScenario
from infctl.sim.cluster.scenarios.seeds import tally


class _Result:
    def __init__(self, ttft_s: float, hit: float) -> None:
        self.ttft_s, self.hit = ttft_s, hit

    def to_dict(self, **_: Any) -> dict[str, Any]:
        return {}


def test_json_units_are_the_values_units() -> None:
    measures = [
        Measure("TTFT p50", lambda r: cast(Any, r).ttft_s, "ms", "lower"),
        Measure("hit rate", lambda r: cast(Any, r).hit, "pct", "higher"),
    ]
    scenario = SimScenario(
        name="x", title="x", base=cast(Any, None), arms=[SimArm("a"), SimArm("b")], measures=measures,
        headline="TTFT p50",
    )  # fmt: skip
    results = [cast(SimResult, _Result(0.058, 0.5)), cast(SimResult, _Result(0.020, 0.75))]
    data = ScenarioOutcome(scenario, results).to_dict()
    ttft, hit = data["measures"]
    assert ttft["values"] == {"a": 0.058, "b": 0.020} and ttft["unit"] == "s"  # was "ms" for 0.058
    assert ttft["display_unit"] == "ms" and measures[0].show(0.058) == "58 ms"
    assert hit["unit"] == "fraction" and hit["display_unit"] == "pct"


def test_slo_attainment_shows_two_decimals_and_seeds_tie_only_at_them() -> None:
    # One miss in 2,000 requests against two: 99.95% and 99.90% both showed "99.9%" and tied seed by seed.
    (day,) = build_scenarios(["autoscaling-business"], ScenarioSize(engines=8, requests=2000, seed=0))
    slo = next(m for m in day.measures if m.name.startswith("SLO"))
    assert (slo.show(0.9995), slo.show(0.999), slo.show(1.0)) == ("99.95%", "99.90%", "100.00%")
    t = tally(slo, [0.9995, 0.99951], [0.999, 0.99949])
    assert (t.wins, t.ties) == (1, 1)
