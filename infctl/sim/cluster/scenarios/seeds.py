"""A comparison run at several seeds: each figure's mean and range, and how often one arm beat another.

One seed's verdict can be chance: two autoscalers 1-2% apart in GPU-hours trade places from one seed to the
next. ``infctl simulate compare --seeds N`` runs every scenario N times, each a full, unchanged run built
with its own seed, and reads them together here (pure, but for :func:`run_seeded`'s loop):

    runs = run_seeded([SCENARIOS["prefix"](ScenarioSize(seed=s)) for s in (0, 1, 2)], (0, 1, 2))
    seeded_rows(runs)               # the comparison table, each cell "1.76 (1.70-1.83)": mean (min-max)
    verdicts(runs)                  # "infctl vs static: GPU-hours lower in 3 of 3 seeds; ..."
    runs.to_dict()                  # seeds, per_seed (one scenario dict each) and a summary per arm

A tie is a pair of figures equal as the table shows them (or exactly equal); a seed where either arm has no
figure (None) counts as neither a win nor a tie.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from infctl.sim.cluster.engine_loop import ProgressFn
from infctl.sim.cluster.scenarios.model import (
    Measure,
    ScenarioOutcome,
    SimScenario,
    run_scenario,
    table_rows,
)


@dataclass(frozen=True)
class Spread:
    """One arm's figure on one measure, seed by seed (None: not measured at that seed)."""

    values: tuple[float | None, ...]

    @property
    def measured(self) -> list[float]:
        return [v for v in self.values if v is not None]

    @property
    def missing(self) -> int:
        return len(self.values) - len(self.measured)

    @property
    def mean(self) -> float | None:
        """Over the seeds that measured it; None if none did."""
        return statistics.fmean(self.measured) if self.measured else None

    @property
    def min(self) -> float | None:
        return min(self.measured, default=None)

    @property
    def max(self) -> float | None:
        return max(self.measured, default=None)

    def to_dict(self) -> dict[str, Any]:
        return {"mean": self.mean, "min": self.min, "max": self.max, "values": list(self.values)}

    def show(self, m: Measure) -> str:
        """``"1.76 (1.70-1.83)"``: the mean, then the range without the unit; ``", n/a in 2"`` when some
        seeds measured nothing."""
        if self.mean is None or self.min is None or self.max is None:
            return "n/a"
        gap = f", n/a in {self.missing}" if self.missing else ""
        return f"{m.show(self.mean)} ({_bare(m, self.min)}-{_bare(m, self.max)}{gap})"


def _bare(m: Measure, v: float) -> str:
    return m.show(v).removesuffix(" ms").removesuffix("%")


@dataclass(frozen=True)
class Tally:
    """How often one arm beat another on ``measure``, over the same seeds."""

    measure: Measure
    wins: int
    ties: int
    """Equal as the table shows them, or exactly equal."""
    losses: int
    missing: int
    """Seeds where either arm has no figure."""

    def say(self, seeds: int | None = None) -> str:
        """``"GPU-hours lower in 9 of 12 seeds, equal in 1"``; without ``seeds``: ``"... lower in 9"``."""
        of = f" of {seeds} seeds" if seeds is not None else ""
        text = f"{self.measure.name} {self.measure.better} in {self.wins}{of}"
        text += f", equal in {self.ties}" if self.ties else ""
        return text + (f", n/a in {self.missing}" if self.missing else "")


def tally(m: Measure, ours: Sequence[float | None], other: Sequence[float | None]) -> Tally:
    """Seed by seed, did ``ours`` beat ``other`` on ``m`` (the way ``m.better`` says)?"""
    wins = ties = losses = missing = 0
    for a, b in zip(ours, other, strict=True):
        if a is None or b is None:
            missing += 1
        elif a == b or m.show(a) == m.show(b):
            ties += 1
        elif (a < b) == (m.better == "lower"):
            wins += 1
        else:
            losses += 1
    return Tally(m, wins, ties, losses, missing)


@dataclass(frozen=True)
class SeededOutcome:
    """One scenario run at each of ``seeds``: ``outcomes[i]`` at ``seeds[i]``."""

    seeds: tuple[int, ...]
    outcomes: tuple[ScenarioOutcome, ...]

    def __post_init__(self) -> None:
        arms = {len(o.scenario.arms) for o in self.outcomes}
        if not self.outcomes or len(self.seeds) != len(self.outcomes) or len(arms) != 1:
            raise ValueError("one outcome per seed, each with the same arms")

    @property
    def scenario(self) -> SimScenario:
        """The first seed's (name, measures and headline are the same at every seed)."""
        return self.outcomes[0].scenario

    @property
    def labels(self) -> list[str]:
        """Each arm's label; one that differs by seed (e.g. the pools a planner chose) lists each."""
        return [
            " / ".join(dict.fromkeys(o.scenario.arms[i].label for o in self.outcomes))
            for i in range(len(self.scenario.arms))
        ]

    @property
    def title(self) -> str:
        return f"{self.scenario.title}; mean (min-max) over {_seed_range(self.seeds)}"

    @property
    def notes(self) -> str:
        first = self.scenario.notes
        if all(o.scenario.notes == first for o in self.outcomes):
            return first
        return f"{first} (seed {self.seeds[0]}; other seeds' notes differ by their seed: per_seed in -o json)"

    def values(self, m: Measure, arm: int) -> tuple[float | None, ...]:
        return tuple(m.value(o.results[arm]) for o in self.outcomes)

    def spread(self, m: Measure, arm: int) -> Spread:
        return Spread(self.values(m, arm))

    def to_dict(self) -> dict[str, Any]:
        """One seed: :meth:`ScenarioOutcome.to_dict` as it is. More: its figures (``measures``' values are
        means), ``seeds``, ``per_seed`` (one such dict each) and ``summary`` (arm -> measure -> mean, min,
        max and every seed's value), raw values in the units ``measures`` name."""
        if len(self.outcomes) == 1:
            return self.outcomes[0].to_dict()
        sc, labels = self.scenario, self.labels
        measures = [
            {**row, "values": {lab: self.spread(m, i).mean for i, lab in enumerate(labels)}}
            for m, row in zip(sc.measures, self.outcomes[0].to_dict()["measures"], strict=True)
        ]
        return {
            "name": sc.name,
            "title": sc.title,
            "arms": labels,
            "headline": sc.headline,
            "notes": self.notes,
            "measures": measures,
            "seeds": list(self.seeds),
            "per_seed": [o.to_dict() for o in self.outcomes],
            "summary": {
                lab: {m.name: self.spread(m, i).to_dict() for m in sc.measures}
                for i, lab in enumerate(labels)
            },
        }


def _seed_range(seeds: Sequence[int]) -> str:
    return f"seed {seeds[0]}" if len(seeds) == 1 else f"seeds {seeds[0]}-{seeds[-1]}"


def seeded_rows(runs: SeededOutcome) -> list[tuple[str, ...]]:
    """The comparison table (:func:`~infctl.sim.cluster.scenarios.model.columns`), each cell the mean and
    range over the seeds, each change the change of the means."""
    sc, arms = runs.scenario, range(len(runs.scenario.arms))
    spreads = [[runs.spread(m, i) for i in arms] for m in sc.measures]
    means = [[s.mean for s in row] for row in spreads]
    cells = [[s.show(m) for s in row] for m, row in zip(sc.measures, spreads, strict=True)]
    return table_rows(sc, means, cells)


def verdicts(runs: SeededOutcome) -> list[str]:
    """One line per arm after the first: in how many seeds it beat the first on the headline. With more
    than two arms, infctl's answer (``SimScenario.ours``) gets a line against each other arm covering every
    measure, headline first: ``"infctl 1-4 vs reactive 1-4: GPU-hours lower in 9 of 12 seeds; SLO
    attainment higher in 4, equal in 6; ..."``."""
    sc, labels, n = runs.scenario, runs.labels, len(runs.seeds)
    head = sc.measure(sc.headline)
    every = [head, *(m for m in sc.measures if m.name != sc.headline)]

    def line(ours: int, other: int, measures: Sequence[Measure]) -> str:
        said = [
            tally(m, runs.values(m, ours), runs.values(m, other)).say(n if k == 0 else None)
            for k, m in enumerate(measures)
        ]
        return f"{labels[ours]} vs {labels[other]}: {'; '.join(said)}"

    if len(labels) == 2:
        return [line(1, 0, [head])]
    others = [line(i, 0, [head]) for i in range(1, len(labels)) if i != sc.ours]
    return others + [line(sc.ours, j, every) for j in range(len(labels)) if j != sc.ours]


def run_seeded(
    scenarios: Sequence[SimScenario],
    seeds: Sequence[int],
    *,
    on_arm: Callable[[str], None] | None = None,
    progress: ProgressFn | None = None,
) -> SeededOutcome:
    """``scenarios[i]`` (the scenario built at ``seeds[i]``) through :func:`run_scenario`, in order;
    ``on_arm`` hears each arm and, with several seeds, which one: ``"prefix: random (seed 3, 2 of 4)"``."""
    outcomes = []
    for k, (sc, seed) in enumerate(zip(scenarios, seeds, strict=True), 1):
        say = (
            on_arm
            if on_arm is None or len(seeds) == 1
            else _tagged(on_arm, f"seed {seed}, {k} of {len(seeds)}")
        )
        outcomes.append(run_scenario(sc, on_arm=say, progress=progress))
    return SeededOutcome(tuple(seeds), tuple(outcomes))


def _tagged(on_arm: Callable[[str], None], tag: str) -> Callable[[str], None]:
    return lambda text: on_arm(f"{text} ({tag})")
