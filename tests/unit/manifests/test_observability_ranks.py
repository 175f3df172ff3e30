"""Alert rules and dashboards count each engine's queue once, whatever its tensor/pipeline parallelism."""

import json
from pathlib import Path

import pytest

from infctl.config.loader import load_deployment
from infctl.manifests.observability import alert_rules, dashboards

PROFILES = Path(__file__).resolve().parents[3] / "profiles"


def _exprs(profile_name: str) -> list[str]:
    profile = load_deployment(PROFILES / f"{profile_name}.yaml")
    rules = [r["expr"] for group in alert_rules(profile, "ns") for r in group["rules"]]
    panels = [
        t["expr"]
        for board in dashboards(profile, "ns").values()
        for p in json.loads(board)["panels"]
        for t in p["targets"]
    ]
    return rules + panels


@pytest.mark.parametrize("name", ["deepseek-v3-group", "kimi-k2-pool", "qwen3-8b-aggregated"])
def test_queue_and_running_sums_drop_tensor_parallel_copies(name: str) -> None:
    # SGLang with --enable-metrics-for-all-schedulers exports each gauge once per tp_rank/pp_rank;
    # a bare `sum by (pod)` over them reads TP x the real queue.
    gauges = [e for e in _exprs(name) if "sum by (pod) (" in e]
    assert gauges
    for expr in gauges:
        for inner in expr.split("sum by (pod) (")[1:]:
            assert inner.startswith("max without (tp_rank, pp_rank) ("), expr
