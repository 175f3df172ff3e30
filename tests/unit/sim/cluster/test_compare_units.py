"""``simulate compare -o json`` labels each measure with the unit of the number it carries."""

from __future__ import annotations

from typing import Any, cast

from infctl.sim.cluster.result import SimResult
from infctl.sim.cluster.scenarios.model import Measure, ScenarioOutcome, SimArm, SimScenario


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
