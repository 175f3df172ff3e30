"""A PD SGLang engine's queue: every request it holds and does not compute yet. Beside the waiting queue
(``sglang:num_queue_reqs``), a prefill's bootstrap queue and a decode's prealloc and transfer queues, as
SGLang's ``/v1/loads`` counts ``num_waiting_reqs`` (0.5.15, 0.5.23 ``load_inquirer.get_loads``); never a
prefill's inflight queue (computed, its KV being sent) nor 0.5.23's decode host-receive queue (a part of the
transfer queue)."""

from __future__ import annotations

import pytest

from infctl.engines import sglang
from infctl.router.ranks import split_by_rank
from infctl.telemetry import parse_metrics

LABELS = 'model_name="m",engine_type="{role}",tp_rank="0",pp_rank="0",moe_ep_rank="0",dp_rank="{dp}"'
"""0.5.15's and 0.5.23's SchedulerMetricsCollector labels, in their order; dp_rank with DP (attention)."""
PD_GAUGES = {
    "0.5.15": (
        "num_prefill_bootstrap_queue_reqs",
        "num_prefill_inflight_queue_reqs",
        "num_decode_prealloc_queue_reqs",
        "num_decode_transfer_queue_reqs",
    ),
    "0.5.23": (
        "num_prefill_bootstrap_queue_reqs",
        "num_prefill_inflight_queue_reqs",
        "num_decode_prealloc_queue_reqs",
        "num_decode_transfer_queue_reqs",
        "num_decode_host_receive_queue_reqs",
    ),
}


def scrape(version: str, role: str, per_rank: list[dict[str, int]]) -> str:
    """One /metrics of an engine with one scheduler per DP rank; each rank's gauges as given, 0 if not
    (every gauge is exported whatever the mode: stats default to 0)."""
    lines = []
    for name in ("num_running_reqs", "num_queue_reqs", *PD_GAUGES[version]):
        lines.append(f"# TYPE sglang:{name} gauge")
        for dp, values in enumerate(per_rank):
            labels = LABELS.format(role=role, dp=dp)
            lines.append(f"sglang:{name}{{{labels}}} {float(values.get(name, 0))}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("version", ["0.5.15", "0.5.23"])
def test_a_prefill_engine_waits_on_its_bootstrap_queue_not_its_inflight_queue(version: str) -> None:
    ranks = [
        {"num_running_reqs": 2, "num_queue_reqs": 3, "num_prefill_bootstrap_queue_reqs": 5,
         "num_prefill_inflight_queue_reqs": 7},
        {"num_running_reqs": 1, "num_queue_reqs": 0, "num_prefill_bootstrap_queue_reqs": 4,
         "num_prefill_inflight_queue_reqs": 9},
    ]  # fmt: skip
    families = parse_metrics(scrape(version, "prefill", ranks), sglang.ADAPTER.wanted_metrics)
    signals = sglang.ADAPTER.signals(families)
    assert (signals.queue, signals.running) == (3 + 5 + 0 + 4, 3)
    by_rank = split_by_rank(families, (0, 1), sglang.DP_RANK_LABEL)
    assert by_rank is not None
    assert [sglang.ADAPTER.signals(by_rank[r]).queue for r in (0, 1)] == [8, 4]


@pytest.mark.parametrize("version", ["0.5.15", "0.5.23"])
def test_a_decode_engine_waits_on_its_prealloc_and_transfer_queues(version: str) -> None:
    ranks = [
        {"num_running_reqs": 40, "num_queue_reqs": 2, "num_decode_prealloc_queue_reqs": 6,
         "num_decode_transfer_queue_reqs": 3, "num_decode_host_receive_queue_reqs": 3},
        {"num_running_reqs": 30, "num_queue_reqs": 1, "num_decode_prealloc_queue_reqs": 0,
         "num_decode_transfer_queue_reqs": 8, "num_decode_host_receive_queue_reqs": 2},
    ]  # fmt: skip
    families = parse_metrics(scrape(version, "decode", ranks), sglang.ADAPTER.wanted_metrics)
    signals = sglang.ADAPTER.signals(families)
    assert (signals.queue, signals.running) == (2 + 6 + 3 + 1 + 0 + 8, 70)


@pytest.mark.parametrize("version", ["0.5.15", "0.5.23"])
def test_an_aggregated_engine_reads_its_waiting_queue_alone(version: str) -> None:
    text = scrape(version, "unified", [{"num_queue_reqs": 4, "num_running_reqs": 9}])
    assert sglang.ADAPTER.signals(parse_metrics(text)).queue == 4


def test_older_releases_name_the_bootstrap_queue_prealloc() -> None:
    # 0.5.4 srt/metrics/collector.py: num_prefill_prealloc_queue_reqs, set from the bootstrap queue.
    labels = 'model_name="m",engine_type="prefill",tp_rank="0",pp_rank="0"'
    text = (
        f"sglang:num_queue_reqs{{{labels}}} 1.0\n"
        f"sglang:num_prefill_prealloc_queue_reqs{{{labels}}} 6.0\n"
        f"sglang:num_prefill_inflight_queue_reqs{{{labels}}} 2.0\n"
    )
    assert sglang.ADAPTER.signals(parse_metrics(text, sglang.ADAPTER.wanted_metrics)).queue == 7


def test_priority_shares_of_a_pd_queue_are_not_added_to_its_total() -> None:
    # --enable-priority-scheduling: the PD queues are QueueCounts too (_log_gauge_queue_count).
    base = 'model_name="m",engine_type="decode",tp_rank="0",pp_rank="0",moe_ep_rank="0"'
    text = "".join(
        f'sglang:num_decode_transfer_queue_reqs{{{base},priority="{p}"}} {n}\n'
        for p, n in (("", 5), ("0", 3), ("1", 2))
    )
    assert sglang.ADAPTER.signals(parse_metrics(text)).queue == 5


@pytest.mark.parametrize("version", ["0.5.15", "0.5.23"])
def test_a_decodes_retractions_are_preemptions_and_not_its_queue(version: str) -> None:
    # sglang:num_retracted_reqs is the latest retraction's size (reset at each stats log), not the decode's
    # retracted queue, which no gauge reports (only /v1/loads counts it); the counter is SGLang's preemptions.
    text = scrape(version, "decode", [{"num_queue_reqs": 2}, {"num_queue_reqs": 1}])
    for dp, (retracted, total) in enumerate(((4, 10), (0, 5))):
        labels = LABELS.format(role="decode", dp=dp)
        copy = labels.replace('tp_rank="0"', 'tp_rank="1"')  # --enable-metrics-for-all-schedulers
        text += f"sglang:num_retracted_reqs{{{labels}}} {retracted}\n"
        text += f"sglang:num_retracted_requests_total{{{labels}}} {total}\n"
        text += f"sglang:num_retracted_requests_total{{{copy}}} {total}\n"
    signals = sglang.ADAPTER.signals(parse_metrics(text, sglang.ADAPTER.wanted_metrics))
    assert (signals.queue, signals.preemptions) == (3, 15)
