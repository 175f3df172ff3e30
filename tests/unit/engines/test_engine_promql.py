"""PromQL of an engine's waiting and running requests counts them as its adapter counts a scrape: for
SGLang the waiting queue plus the PD queues, each rank's copies once, no per-priority share; for vLLM its
one gauge, as before. ``promtool test rules`` evaluates the expressions over the series of real-shaped
scrapes and must answer, pod by pod, the queue the adapter reads from the same scrape."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from promtoolkit import PROMTOOL, promtool_test

from infctl.engines import sglang, vllm
from infctl.engines.promql import running_series, waiting_series
from infctl.telemetry import parse_metrics

SEL = 'namespace="ns",job="ns/r-engines"'

Series = list[tuple[str, dict[str, str], float]]


def test_sglang_waiting_requests_name_every_waiting_gauge_once_per_rank() -> None:
    expr = waiting_series(sglang.SIGNAL_METRICS, SEL)
    assert expr.startswith("max without (tp_rank, pp_rank, moe_ep_rank) (")
    for name in (sglang.NUM_QUEUE_REQS, *sglang.WAITING_PD_QUEUES):
        assert f'{name}{{{SEL},priority=""}}' in expr
        assert f'"infctl_gauge", "{name}"' in expr
    assert sglang.NUM_PREFILL_INFLIGHT_QUEUE_REQS not in expr  # prefilled, its KV being sent
    growth = waiting_series(sglang.SIGNAL_METRICS, SEL, deriv="10m")
    assert all(f'deriv({n}{{{SEL},priority=""}}[10m])' in growth for n in sglang.SIGNAL_METRICS.queues)
    running = running_series(sglang.SIGNAL_METRICS, SEL)
    assert (
        running
        == f'max without (tp_rank, pp_rank, moe_ep_rank) (sglang:num_running_reqs{{{SEL},priority=""}})'
    )


def test_vllm_reads_its_one_gauge_as_before() -> None:
    m = vllm.SIGNAL_METRICS
    assert m.queues == ("vllm:num_requests_waiting",)
    assert waiting_series(m, SEL) == f"max without (tp_rank, pp_rank) (vllm:num_requests_waiting{{{SEL}}})"
    assert (
        waiting_series(m, SEL, deriv="10m")
        == f"max without (tp_rank, pp_rank) (deriv(vllm:num_requests_waiting{{{SEL}}}[10m]))"
    )
    assert running_series(m, SEL) == f"max without (tp_rank, pp_rank) (vllm:num_requests_running{{{SEL}}})"


def test_sglang_signals_read_the_gauges_the_queries_name() -> None:
    assert sglang.SIGNAL_METRICS.queues == (sglang.NUM_QUEUE_REQS, *sglang.WAITING_PD_QUEUES)
    assert set(sglang.SIGNAL_METRICS.queues) <= sglang.ADAPTER.wanted_metrics
    assert set(sglang.SIGNAL_METRICS.copy_labels) == sglang.SCHEDULER_COPY_LABELS


def scheduler(role: str, **ranks: str) -> dict[str, str]:
    """0.5.15/0.5.23 SchedulerMetricsCollector labels (moe_ep_rank, dp_rank as given)."""
    return {"model_name": "m", "engine_type": role, "tp_rank": "0", "pp_rank": "0", **ranks}


def pods() -> dict[str, Series]:
    """Real-shaped scrapes, pod by pod (name, labels, value)."""
    pd_prefill: Series = []
    for dp, (queue, bootstrap, inflight) in enumerate(((3, 5, 7), (0, 4, 9))):
        for tp, lag in ((0, 0), (1, 1)):  # --enable-metrics-for-all-schedulers: a copy per TP rank, lagging
            labels = {**scheduler("prefill", moe_ep_rank=str(tp), dp_rank=str(dp)), "tp_rank": str(tp)}
            pd_prefill += [
                ("sglang:num_queue_reqs", labels, queue - lag * (queue > 0)),
                ("sglang:num_prefill_bootstrap_queue_reqs", labels, bootstrap),
                ("sglang:num_prefill_inflight_queue_reqs", labels, inflight),
                ("sglang:num_decode_prealloc_queue_reqs", labels, 0),
                ("sglang:num_decode_transfer_queue_reqs", labels, 0),
            ]
    pd_decode: Series = []  # --enable-priority-scheduling: the total under priority="", shares beside it
    for name, total, shares in (
        ("sglang:num_queue_reqs", 4, (3, 1)),
        ("sglang:num_decode_prealloc_queue_reqs", 2, (2, 0)),
        ("sglang:num_decode_transfer_queue_reqs", 5, (1, 4)),
        ("sglang:num_prefill_bootstrap_queue_reqs", 0, (0, 0)),
    ):
        labels = scheduler("decode", moe_ep_rank="0")
        pd_decode.append((name, {**labels, "priority": ""}, total))
        pd_decode += [(name, {**labels, "priority": str(p)}, n) for p, n in enumerate(shares)]
    old = {"name": "m", "engine_type": "prefill", "tp_rank": "0", "pp_rank": "0"}  # 0.5.4: no bootstrap name
    older_prefill: Series = [
        ("sglang:num_queue_reqs", old, 1),
        ("sglang:num_prefill_prealloc_queue_reqs", old, 6),
        ("sglang:num_prefill_inflight_queue_reqs", old, 2),
    ]
    unified: Series = [("sglang:num_queue_reqs", scheduler("unified", moe_ep_rank="0"), 4)]
    return {"prefill-0": pd_prefill, "decode-0": pd_decode, "older-0": older_prefill, "unified-0": unified}


def adapter_queue(series: Series) -> float:
    text = "".join(
        f"{name}{{{','.join(f'{k}={chr(34)}{v}{chr(34)}' for k, v in labels.items())}}} {value}\n"
        for name, labels, value in series
    )
    return sglang.ADAPTER.signals(parse_metrics(text, sglang.ADAPTER.wanted_metrics)).queue


def promtool_eval(tmp_path: Path, inputs: list[dict[str, str]], tests: list[dict[str, Any]]) -> None:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": []}))
    promtool_test(tmp_path, {"interval": "1m", "input_series": inputs, "promql_expr_test": tests})


def series_name(name: str, labels: dict[str, str]) -> str:
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"


@PROMTOOL
def test_prometheus_sums_each_pods_queue_as_the_adapter_reads_its_scrape(tmp_path: Path) -> None:
    scrapes = pods()
    queues = {pod: adapter_queue(series) for pod, series in scrapes.items()}
    # prefill: per DP rank the larger copy's queue + bootstrap; decode: totals only; 0.5.4's older name.
    assert queues == {"prefill-0": 3 + 5 + 0 + 4, "decode-0": 4 + 2 + 5, "older-0": 1 + 6, "unified-0": 4}
    inputs, growing = [], []
    for pod, series in scrapes.items():
        for name, labels, value in series:
            full = {"namespace": "ns", "job": "ns/r-engines", "pod": pod, **labels}
            inputs.append({"series": series_name(name, full), "values": f"{value:g}x20"})
            growing.append({"series": series_name(name, full), "values": f"0+{value:g}x20"})
    m = sglang.SIGNAL_METRICS
    promtool_eval(
        tmp_path,
        inputs,
        [
            {
                "expr": f"sum by (pod) ({waiting_series(m, SEL)})",
                "eval_time": "10m",
                "exp_samples": [{"labels": f'{{pod="{p}"}}', "value": q} for p, q in queues.items()],
            }
        ],
    )
    # Growing by each gauge's value a minute: the queue's growth is the same sum, per second.
    promtool_eval(
        tmp_path,
        growing,
        [
            {
                "expr": f"sum by (pod) ({waiting_series(m, SEL, deriv='10m')}) * 60",
                "eval_time": "15m",
                "exp_samples": [{"labels": f'{{pod="{p}"}}', "value": q} for p, q in queues.items()],
            }
        ],
    )
