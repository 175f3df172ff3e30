"""What a simulated comparison is: arms over one base config, the measures the seed reported, and its figures.

A :class:`SimScenario` is a pure description. Its arms share the base :class:`SimConfig` (so the same
workload, load plan and seed) and differ only in the fields each arm replaces (routing policy, autoscaler,
engine options such as a second KV tier) and, for length bucketing, the pool each engine belongs to.
:func:`run_scenario` runs every arm through the simulator; :func:`scenario_rows` turns the results into the
comparison table the demo prints for the live stack (:func:`infctl.bench.scenarios.scenario_rows`): one row
per measure, each arm's figure, the change against the first arm, and what the seed reported.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from infctl.sim.cluster.config import SimConfig
from infctl.sim.cluster.engine_loop import ProgressFn
from infctl.sim.cluster.result import SimResult
from infctl.sim.cluster.run import simulate

Unit = Literal["ms", "pct", "tok/s", "req/s", "h", "count"]
VALUE_UNITS: dict[str, str] = {"ms": "s", "pct": "fraction", "h": "h", "tok/s": "tok/s", "req/s": "req/s"}
"""The unit of a measure's raw value (what JSON carries) by the unit the table shows it in: a latency is
measured in seconds and shown in ms, a share is a fraction shown in percent."""


@dataclass(frozen=True)
class Measure:
    """One row of a comparison table."""

    name: str
    """As the seed names it (the key of ``SimScenario.seed_says``)."""
    value: Callable[[SimResult], float | None]
    """Reads the figure from one arm's result (None: not measurable, e.g. no request met the filter)."""
    unit: Unit
    better: Literal["lower", "higher"]
    """Which way is an improvement (tests check the headline measure moves this way)."""
    decimals: int = 1
    """Of a ``pct`` measure: 2 for an SLO attainment, whose goal (99.5%) one decimal cannot tell from a miss
    in 2,000 requests (99.95% and 99.90% both show 99.9%, and seeds count as tied at the shown precision)."""

    def show(self, v: float | None) -> str:
        if v is None:
            return "n/a"
        return {
            "ms": f"{v * 1e3:.0f} ms",
            "pct": f"{v * 100:.{self.decimals}f}%",
            "tok/s": f"{v:.0f}",
            "req/s": f"{v:.2f}",
            "h": f"{v:.2f}",
            "count": f"{v:.0f}",
        }[self.unit]


@dataclass(frozen=True)
class SimArm:
    """One way of running the base config."""

    label: str
    changes: Mapping[str, Any] = field(default_factory=dict)
    """``SimConfig`` fields this arm replaces (``policy``, ``autoscale``, ``engine_options``...)."""
    pools: Sequence[str | None] = ()
    """Pool of each engine, in engine order (what length buckets route to); empty: no pools."""

    def config(self, base: SimConfig) -> SimConfig:
        return dataclasses.replace(base, label=self.label, pools=tuple(self.pools), **self.changes)


@dataclass(frozen=True)
class SimScenario:
    name: str
    """Machine name (``infctl simulate compare NAME``)."""
    title: str
    """Table title: what is compared, on what."""
    base: SimConfig
    arms: Sequence[SimArm]
    """The first is the baseline every change is measured against; ``ours`` is infctl's answer."""
    measures: Sequence[Measure]
    headline: str
    """The measure this comparison is about (the second arm must beat the first on it)."""
    seed_says: Mapping[str, str] = field(default_factory=dict)
    """Measure -> what the seed reported for it."""
    notes: str = ""
    """How the figures were made (load, sizes), printed under the table."""
    ours: int = 1
    """Index of infctl's answer in ``arms`` (over several seeds, the arm judged against every other)."""

    def measure(self, name: str) -> Measure:
        return next(m for m in self.measures if m.name == name)


@dataclass(frozen=True)
class ScenarioOutcome:
    scenario: SimScenario
    results: Sequence[SimResult]
    """One per arm, in arm order."""

    def value(self, measure: str, arm: int) -> float | None:
        return self.scenario.measure(measure).value(self.results[arm])

    def to_dict(self) -> dict[str, Any]:
        """The table's figures (raw values, SI units) and every arm's full result in the bench schema."""
        sc = self.scenario
        labels = [a.label for a in sc.arms]
        return {
            "name": sc.name,
            "title": sc.title,
            "arms": labels,
            "headline": sc.headline,
            "notes": sc.notes,
            "measures": [
                {
                    "measure": m.name,
                    "unit": VALUE_UNITS.get(m.unit, m.unit),
                    "display_unit": m.unit,
                    "better": m.better,
                    "values": {lab: m.value(r) for lab, r in zip(labels, self.results, strict=True)},
                    "seed_reported": sc.seed_says.get(m.name),
                }
                for m in sc.measures
            ],
            "results": {
                lab: r.to_dict(timeseries=False) for lab, r in zip(labels, self.results, strict=True)
            },
        }


def run_scenario(
    scenario: SimScenario,
    *,
    on_arm: Callable[[str], None] | None = None,
    progress: ProgressFn | None = None,
) -> ScenarioOutcome:
    """Every arm through the simulator, in order. ``on_arm`` hears which arm starts; ``progress`` is handed
    to :func:`~infctl.sim.cluster.simulate` (about twice a second of wall time)."""
    results = []
    for arm in scenario.arms:
        if on_arm is not None:
            on_arm(f"{scenario.name}: {arm.label}")
        results.append(simulate(arm.config(scenario.base), progress=progress))
    return ScenarioOutcome(scenario, results)


def columns(scenario: SimScenario, labels: Sequence[str] = ()) -> list[str]:
    """Two arms: ``measure``, both arms, ``change``, ``seed reported`` (the demo's table). More arms: each
    later arm's cell carries its change against the first, ``"134 ms (-86%)"``, to keep the table narrow.
    ``labels``: the arms' headings (default: their labels)."""
    labels = labels or [a.label for a in scenario.arms]
    return ["measure", *labels, *(["change"] if len(labels) == 2 else []), "seed reported"]


def scenario_rows(outcome: ScenarioOutcome) -> list[tuple[str, ...]]:
    """The comparison table's rows, in the shape of :func:`infctl.bench.scenarios.scenario_rows`."""
    sc = outcome.scenario
    values = [[m.value(r) for r in outcome.results] for m in sc.measures]
    return table_rows(
        sc, values, [[m.show(v) for v in vs] for m, vs in zip(sc.measures, values, strict=True)]
    )


def table_rows(
    scenario: SimScenario, values: Sequence[Sequence[float | None]], cells: Sequence[Sequence[str]]
) -> list[tuple[str, ...]]:
    """The table of :func:`columns` from each measure's ``values`` (one per arm: the changes) and ``cells``
    (one per arm: what each arm's column shows)."""
    rows: list[tuple[str, ...]] = []
    for m, vs, shown in zip(scenario.measures, values, cells, strict=True):
        base = vs[0]
        seed = scenario.seed_says.get(m.name, "")
        if len(vs) == 2:
            rows.append((m.name, shown[0], shown[1], _change(base, vs[1]), seed))
        else:
            later = [f"{s} ({_change(base, v)})" for s, v in zip(shown[1:], vs[1:], strict=True)]
            rows.append((m.name, shown[0], *later, seed))
    return rows


def _change(x: float | None, y: float | None) -> str:
    return f"{(y - x) / x * 100:+.0f}%" if x and y is not None else "n/a"
