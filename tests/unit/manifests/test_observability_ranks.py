"""Alert rules and dashboards count each engine's queue once, whatever its tensor/pipeline parallelism, and as
its adapter counts it (SGLang: with the PD queues, without priority shares)."""

import json
from pathlib import Path

import pytest

from infctl.config.loader import load_deployment
from infctl.engines import sglang
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


@pytest.mark.parametrize(
    ("name", "copies"),
    [
        ("deepseek-v3-group", "tp_rank, pp_rank, moe_ep_rank"),
        ("kimi-k2-pool", "tp_rank, pp_rank"),
        ("qwen3-8b-aggregated", "tp_rank, pp_rank"),
    ],
)
def test_queue_and_running_sums_drop_tensor_parallel_copies(name: str, copies: str) -> None:
    # SGLang with --enable-metrics-for-all-schedulers exports each gauge once per tp_rank/pp_rank (and
    # moe_ep_rank with EP); a bare `sum by (pod)` over them reads TP x the real queue.
    gauges = [e for e in _exprs(name) if "sum by (pod) (" in e]
    assert gauges
    for expr in gauges:
        for inner in expr.split("sum by (pod) (")[1:]:
            assert inner.startswith(f"max without ({copies}) ("), expr


def test_sglang_queries_count_the_pd_queues_and_no_priority_share() -> None:
    # As the adapter reads a scrape (3d0bbb9, de50128): the waiting queue, a prefill's bootstrap queue (or
    # its older name) and a decode's prealloc and transfer queues; the totals under priority="" only.
    queues = [e for e in _exprs("deepseek-v3-group") if sglang.NUM_QUEUE_REQS in e]
    assert len(queues) == 2  # InfctlQueueGrowing and the dashboard's queue panel
    for expr in queues:
        for name in (sglang.NUM_QUEUE_REQS, *sglang.WAITING_PD_QUEUES):
            assert f'{name}{{namespace="ns",job="ns/deepseek-v3-engines",priority=""}}' in expr, name
        assert sglang.NUM_PREFILL_INFLIGHT_QUEUE_REQS not in expr
    (growing,) = [e for e in queues if "deriv(" in e]
    assert all(f"deriv({name}{{" in growing for name in sglang.SIGNAL_METRICS.queues)


def test_vllm_queue_alert_reads_its_one_gauge_as_before() -> None:
    (growing,) = [e for e in _exprs("qwen3-8b-aggregated") if "deriv(" in e]
    gauge = 'vllm:num_requests_waiting{namespace="ns",job="ns/qwen3-8b-engines"}'
    assert growing == (
        f"sum by (pod) (max without (tp_rank, pp_rank) ({gauge})) > 4"
        f" and sum by (pod) (max without (tp_rank, pp_rank) (deriv({gauge}[10m]))) > 0"
    )
