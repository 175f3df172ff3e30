"""``simulate compare --seeds N``: means and ranges over the seeds, and how often one arm beat another."""

from __future__ import annotations

from typing import Any, cast

import pytest

from infctl.sim.cluster.result import SimResult
from infctl.sim.cluster.scenarios.model import Measure, ScenarioOutcome, SimArm, SimScenario
from infctl.sim.cluster.scenarios.seeds import SeededOutcome, Spread, seeded_rows, tally, verdicts

GPU_H = Measure("GPU-hours", lambda r: cast(Any, r).fig["h"], "h", "lower")
SLO = Measure("SLO attainment", lambda r: cast(Any, r).fig["slo"], "pct", "higher")
TTFT = Measure("TTFT p99", lambda r: cast(Any, r).fig["ttft"], "ms", "lower")


class _Result:
    def __init__(self, **fig: float | None) -> None:
        self.fig = fig

    def to_dict(self, **_: Any) -> dict[str, Any]:
        return {"fig": self.fig}


def outcome(
    arms: list[str], figs: list[dict[str, float | None]], notes: str = "n", ours: int = 1
) -> ScenarioOutcome:
    sc = SimScenario(
        name="day", title="a day", base=cast(Any, None), arms=[SimArm(a) for a in arms],
        measures=[GPU_H, SLO, TTFT], headline="GPU-hours", seed_says={"GPU-hours": "-26%"}, notes=notes,
        ours=ours,
    )  # fmt: skip
    return ScenarioOutcome(sc, [cast(SimResult, _Result(**f)) for f in figs])


def fig(h: float, slo: float | None = 1.0, ttft: float | None = 0.1) -> dict[str, float | None]:
    return {"h": h, "slo": slo, "ttft": ttft}


def test_spread_is_over_the_seeds_that_measured() -> None:
    s = Spread((1.70, None, 1.83, 1.75))
    assert s.mean == pytest.approx(1.76) and (s.min, s.max, s.missing) == (1.70, 1.83, 1)
    assert s.show(GPU_H) == "1.76 (1.70-1.83, n/a in 1)"
    assert Spread((1.70, 1.83)).show(GPU_H) == "1.77 (1.70-1.83)"
    assert Spread((0.120, 0.150)).show(TTFT) == "135 ms (120-150)"
    assert Spread((0.97, 0.995)).show(SLO) == "98.2% (97.0-99.5)"
    nothing = Spread((None, None))
    assert nothing.show(TTFT) == "n/a" and nothing.to_dict() == {
        "mean": None, "min": None, "max": None, "values": [None, None],
    }  # fmt: skip


def test_tally_counts_wins_ties_and_unmeasured_seeds() -> None:
    # lower is better: a win, a loss, an exact tie, a tie at the shown precision (1.001 vs 1.004: "1.00"), n/a
    t = tally(GPU_H, [1.0, 2.0, 1.5, 1.001, None], [1.2, 1.8, 1.5, 1.004, 1.0])
    assert (t.wins, t.losses, t.ties, t.missing) == (1, 1, 2, 1)
    assert t.say(5) == "GPU-hours lower in 1 of 5 seeds, equal in 2, n/a in 1"
    up = tally(SLO, [0.99, 0.98, 0.9995], [0.98, 0.99, 0.9999])  # 100.0% both at the last seed
    assert (up.wins, up.losses, up.ties) == (1, 1, 1) and up.say() == "SLO attainment higher in 1, equal in 1"


def test_table_cells_are_means_and_ranges_and_changes_are_of_the_means() -> None:
    runs = SeededOutcome(
        (0, 1),
        (
            outcome(["static", "auto"], [fig(2.0), fig(1.0)]),
            outcome(["static", "auto"], [fig(2.0), fig(2.0)]),
        ),
    )
    rows = seeded_rows(runs)
    assert rows[0] == ("GPU-hours", "2.00 (2.00-2.00)", "1.50 (1.00-2.00)", "-25%", "-26%")
    assert verdicts(runs) == ["auto vs static: GPU-hours lower in 1 of 2 seeds, equal in 1"]
    assert runs.title == "a day; mean (min-max) over seeds 0-1"


def test_infctls_arm_is_judged_against_every_other_on_every_measure() -> None:
    arms = ["static", "reactive", "infctl"]
    runs = SeededOutcome(
        (5, 6, 7),
        (
            outcome(arms, [fig(4.0), fig(3.0, 0.99), fig(2.9, 0.99, None)], ours=2),
            outcome(arms, [fig(4.0), fig(3.0, 0.98), fig(3.1, 0.99, 0.2)], ours=2),
            outcome(arms, [fig(4.0), fig(3.0, 0.99), fig(2.8, 0.98, 0.05)], ours=2),
        ),
    )
    assert verdicts(runs) == [
        "reactive vs static: GPU-hours lower in 3 of 3 seeds",
        "infctl vs static: GPU-hours lower in 3 of 3 seeds; SLO attainment higher in 0; "
        "TTFT p99 lower in 1, n/a in 1",
        "infctl vs reactive: GPU-hours lower in 2 of 3 seeds; SLO attainment higher in 1, equal in 1; "
        "TTFT p99 lower in 1, n/a in 1",
    ]
    # Not the last arm: in the prefix comparison infctl's cache_aware is the second of three.
    ahead = SeededOutcome(
        (0,), (outcome(["random", "infctl", "round robin"], [fig(4.0), fig(2.0), fig(3.0)]),)
    )
    assert verdicts(ahead) == [
        "round robin vs random: GPU-hours lower in 1 of 1 seeds",
        "infctl vs random: GPU-hours lower in 1 of 1 seeds; SLO attainment higher in 0, equal in 1; "
        "TTFT p99 lower in 0, equal in 1",
        "infctl vs round robin: GPU-hours lower in 1 of 1 seeds; SLO attainment higher in 0, equal in 1; "
        "TTFT p99 lower in 0, equal in 1",
    ]
    rows = seeded_rows(runs)
    assert rows[2] == (
        "TTFT p99", "100 ms (100-100)", "100 ms (100-100) (+0%)", "125 ms (50-200, n/a in 1) (+25%)", "",
    )  # fmt: skip


def test_json_has_seeds_per_seed_and_a_summary_of_raw_values() -> None:
    per = [outcome(["a", "b"], [fig(2.0), fig(1.0, None)]), outcome(["a", "b"], [fig(3.0), fig(1.5, 0.5)])]
    data = SeededOutcome((0, 1), tuple(per)).to_dict()
    assert data["seeds"] == [0, 1]
    assert data["per_seed"] == [o.to_dict() for o in per]
    assert data["summary"]["a"]["GPU-hours"] == {"mean": 2.5, "min": 2.0, "max": 3.0, "values": [2.0, 3.0]}
    assert data["summary"]["b"]["SLO attainment"] == {
        "mean": 0.5,
        "min": 0.5,
        "max": 0.5,
        "values": [None, 0.5],
    }
    head = data["measures"][0]
    assert head["values"] == {"a": 2.5, "b": 1.25} and head["unit"] == "h" and head["seed_reported"] == "-26%"
    assert "results" not in data  # each seed's are in per_seed


def test_one_seed_is_todays_output_and_labels_that_differ_by_seed_say_so() -> None:
    one = outcome(["a", "b"], [fig(2.0), fig(1.0)])
    assert SeededOutcome((0,), (one,)).to_dict() == one.to_dict()
    runs = SeededOutcome((0, 1), (one, outcome(["a", "b'"], [fig(2.0), fig(1.0)], notes="m")))
    assert runs.labels == ["a", "b / b'"]
    assert runs.notes.startswith("n (seed 0;")
    with pytest.raises(ValueError):
        SeededOutcome((0, 1), (one,))
