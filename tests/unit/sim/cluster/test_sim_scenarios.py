"""Each comparison, run small: its infctl arm beats its baseline on the measure it is about."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path

import pytest

from infctl.errors import ConfigError
from infctl.sim.cluster.scenarios import (
    SCENARIOS,
    ScenarioSize,
    build_scenarios,
    columns,
    run_scenario,
    scenario_rows,
)
from infctl.sim.cluster.scenarios.catalog import DEEPSEEK_V3_H200

SMALL = DEEPSEEK_V3_H200.with_overrides(name="dsv3-small", num_gpu_blocks=512, max_num_seqs=64)
"""DeepSeek-V3's step model with 32k tokens of HBM, so a few hundred requests overflow it."""


def small_trace(path: Path, n: int = 240, groups: int = 40, own: int = 1, seed: int = 1) -> Path:
    """A Mooncake-format trace: each request a 4-block prefix of one of ``groups`` (popular ones more
    often) and ``own`` blocks of its own (512 tokens each); 100 ms apart."""
    rng = random.Random(seed)
    lines = []
    for i in range(n):
        g = min(int(rng.paretovariate(1.0)) - 1, groups - 1)
        hashes = [g * 10 + k for k in range(4)] + [100_000 + i * 100 + k for k in range(own)]
        lines.append(
            {"timestamp": i * 100, "input_length": len(hashes) * 512, "output_length": 16, "hash_ids": hashes}
        )
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


BLOCKS = {"bucketing": 4096, "prefix": 128}
"""Bucketing's long prompts (8k-24k tokens) need room for a few at once; shared prefixes scale with HBM (an
eighth of it each), so a smaller one keeps the prompts short."""


@pytest.fixture
def size(tmp_path: Path) -> ScenarioSize:
    return ScenarioSize(engines=4, requests=120, profile=SMALL, trace=small_trace(tmp_path / "t.jsonl"))


def improves(outcome: object, measure: str) -> tuple[float, float, bool]:
    from infctl.sim.cluster.scenarios import ScenarioOutcome

    assert isinstance(outcome, ScenarioOutcome)
    base, ours = outcome.value(measure, 0), outcome.value(measure, 1)
    assert base is not None and ours is not None
    better = outcome.scenario.measure(measure).better
    return base, ours, ours < base if better == "lower" else ours > base


@pytest.mark.parametrize("name", ["bucketing", "prefix", "prefix-mooncake", "kv-tier"])
def test_infctl_arm_beats_the_baseline_on_the_headline(name: str, size: ScenarioSize) -> None:
    if name in BLOCKS:
        size = replace(size, profile=SMALL.with_overrides(num_gpu_blocks=BLOCKS[name]))
    scenario = SCENARIOS[name](size)
    outcome = run_scenario(scenario)
    base, ours, ok = improves(outcome, scenario.headline)
    assert ok, (name, scenario.headline, base, ours)
    for r in outcome.results:
        assert r.bench.summary.failed == 0 and r.bench.summary.completed == size.requests


def test_autoscaling_saves_gpu_hours_and_follows_the_day(tmp_path: Path) -> None:
    trace = small_trace(tmp_path / "t.jsonl", n=200, own=26)  # the trace's mean prompt: 15k tokens
    scenario = SCENARIOS["autoscaling-business"](ScenarioSize(engines=8, requests=200, trace=trace))
    assert [a.label.split()[0] for a in scenario.arms] == ["static", "reactive", "KEDA-style", "infctl"]
    outcome = run_scenario(scenario)
    static, *autoscaled = outcome.results
    assert static.scale_events == []
    for auto in autoscaled:
        assert auto.gpu_hours < static.gpu_hours
        # SLO attainment is a figure to read, not to assert: a 200-request day lasts half a minute, shorter
        # than an engine's (scaled) startup.
        assert auto.bench.summary.good_fraction is not None
        # The day's shape reached the fleet: it started small at night and grew for the peak.
        desired = [p.desired for p in auto.replicas]
        assert desired[0] == 1 and max(desired) > 1


def test_autoscaling_runs_every_day() -> None:
    built = build_scenarios(["autoscaling"], ScenarioSize(requests=200))
    assert [s.name for s in built] == ["autoscaling-business", "autoscaling-consumer", "autoscaling-spiky"]
    assert len({s.base.load.stages[0].rate for s in built}) > 1  # three days, three load plans
    again = build_scenarios(["autoscaling", "autoscaling-spiky"], ScenarioSize(requests=200))
    assert [s.name for s in again] == [s.name for s in built]


def test_rows_have_the_demo_table_shape(size: ScenarioSize) -> None:
    outcome = run_scenario(SCENARIOS["bucketing"](replace(size, requests=40)))
    cols = columns(outcome.scenario)
    assert cols == ["measure", *(a.label for a in outcome.scenario.arms), "change", "seed reported"]
    rows = scenario_rows(outcome)
    assert all(len(r) == len(cols) for r in rows)
    headline = next(r for r in rows if r[0] == "short TTFT p99")
    assert headline[-1] == "-91%" and headline[3].startswith("-")
    # Three arms: each later arm's cell carries its change.
    three = run_scenario(SCENARIOS["kv-tier"](replace(size, requests=40)))
    assert columns(three.scenario) == ["measure", *(a.label for a in three.scenario.arms), "seed reported"]
    row = scenario_rows(three)[0]
    assert len(row) == 5 and row[2].endswith("%)") and "(" not in row[1]


def test_bad_names_and_sizes_are_config_errors(size: ScenarioSize, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown scenario"):
        build_scenarios(["prefix", "fastest"], size)
    with pytest.raises(ConfigError, match="at least 2 engines"):
        ScenarioSize(engines=1)
    with pytest.raises(ConfigError, match=r"trace .* is missing"):
        build_scenarios(["kv-tier"], ScenarioSize(trace=tmp_path / "nope.jsonl"))


def test_on_a_trace_the_seed_moves_the_routers_timing_reproducibly(size: ScenarioSize) -> None:
    from infctl.sim.cluster import variant_scrape_interval

    def cache_aware(seed: int) -> tuple[object, ...]:
        scenario = SCENARIOS["prefix-mooncake"](replace(size, seed=seed, requests=60))
        assert scenario.base.scrape_interval_s == variant_scrape_interval(seed)
        assert f"seed {seed} sets the router's scrape interval" in scenario.notes
        outcome = run_scenario(replace(scenario, arms=[a for a in scenario.arms if "cache_aware" in a.label]))
        (result,) = outcome.results
        return tuple((r.end_s, r.cached_tokens) for r in result.bench.requests)

    assert [round(variant_scrape_interval(s), 4) for s in (0, 1, 2, 3, 12, 13)] == [
        0.1,
        0.093,
        0.107,
        0.086,
        0.142,
        0.1,
    ]
    first = cache_aware(1)
    assert cache_aware(1) == first  # reproducible
    assert cache_aware(2) != first  # and the seed matters
