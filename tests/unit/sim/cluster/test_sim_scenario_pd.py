"""``simulate compare pd``: aggregated vs Group- and Pool-mode PD on the same engines and traffic."""

from __future__ import annotations

import json
from pathlib import Path

from infctl.sim.cluster.scenarios import SCENARIOS, ScenarioSize, build_scenarios, run_scenario, scenario_rows
from infctl.sim.cluster.scenarios.catalog import DEEPSEEK_V3_H200


def small_trace(path: Path, n: int) -> Path:
    """A Mooncake-format trace, 100 ms apart: a 2-block prefix of one of 8 groups, then 8 blocks of its own
    (512 tokens a block: 5k-token prompts, worth disaggregating)."""
    lines = [
        {"timestamp": i * 100, "input_length": 10 * 512, "output_length": 32,
         "hash_ids": [i % 8, 100 + i % 8] + [10_000 + i * 10 + k for k in range(8)]}
        for i in range(n)
    ]  # fmt: skip
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def test_pd_arms_share_hardware_and_traffic_and_isolate_decode(tmp_path: Path) -> None:
    trace = small_trace(tmp_path / "t.jsonl", n=160)
    size = ScenarioSize(engines=5, requests=120, trace=trace)
    (scenario,) = build_scenarios(["pd"], size)
    assert "pd" in SCENARIOS and scenario.arms[0].label == "aggregated"
    outcome = run_scenario(scenario)
    aggregated, group, pool = outcome.results
    assert [r.config.engines for r in outcome.results] == [4, 4, 4]  # 5 engines round down to 2 x 1P1D
    assert aggregated.config.pd is None
    assert group.config.pd is not None and group.config.pd.mode == "group"
    assert pool.config.pd is not None and pool.config.pd.mode == "pool"
    assert len({tuple(x.input_tokens for x in r.bench.requests) for r in outcome.results}) == 1
    for r in outcome.results:
        assert r.bench.summary.failed == 0 and r.bench.summary.completed == 120
        assert r.config.profile is DEEPSEEK_V3_H200
    assert group.pd is not None and set(group.pd["transfers"]) == {"intra_group"}
    assert group.pd["requests"].get("disaggregated", 0) > 0
    # Decode engines never run a long prefill chunk: the tail of TPOT falls.
    agg_tpot, group_tpot = outcome.value("TPOT p99", 0), outcome.value("TPOT p99", 1)
    assert agg_tpot is not None and group_tpot is not None and group_tpot < agg_tpot
    rows = scenario_rows(outcome)
    assert [r[0] for r in rows][:4] == ["TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99"]
    assert any(r[0].startswith("goodput") for r in rows)
