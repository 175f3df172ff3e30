"""SGLang with TP>1 reports one copy of each scheduler gauge per TP rank
(``--enable-metrics-for-all-schedulers``): the adapter reads each data-parallel rank once, never the copies
added up."""

from pathlib import Path

import pytest

from infctl.engines import sglang
from infctl.router.ranks import split_by_rank
from infctl.telemetry import parse_metrics

FIXTURE = Path(__file__).parent / "fixtures" / "sglang_v0_5_tp4_dp2_all_schedulers.prom"


def _gauges(tp: int, running: float, queue: float, usage: float, capacity: float) -> str:
    labels = 'engine_type="unified",model_name="m",pp_rank="0",tp_rank="{}"'
    return "".join(
        f"sglang:num_running_reqs{{{labels.format(r)}}} {running}\n"
        f"sglang:num_queue_reqs{{{labels.format(r)}}} {queue}\n"
        f"sglang:token_usage{{{labels.format(r)}}} {usage}\n"
        f"sglang:max_total_num_tokens{{{labels.format(r)}}} {capacity}\n"
        for r in range(tp)
    )


@pytest.mark.parametrize("tp", [1, 2, 8])
def test_tp_copies_of_one_scheduler_read_as_one(tp: int) -> None:
    signals = sglang.ADAPTER.signals(parse_metrics(_gauges(tp, 12, 4, 0.6, 160_000)))
    assert (signals.running, signals.queue, signals.cache_capacity_tokens) == (12.0, 4.0, 160_000)
    assert signals.kv_usage == pytest.approx(0.6)


def test_dp_attention_ranks_add_up_and_their_tp_copies_do_not() -> None:
    # TP=4, DP attention over 2 ranks, every scheduler reporting: tp_rank 0-1 are dp_rank 0, 2-3 dp_rank 1;
    # tp_rank 3 lags a step behind tp_rank 2 (23 running, 2 queued, usage 0.24).
    families = parse_metrics(FIXTURE.read_text(), sglang.ADAPTER.wanted_metrics)
    signals = sglang.ADAPTER.signals(families)
    assert (signals.running, signals.queue) == (40.0 + 24.0, 3.0 + 2.0)  # the larger copy of a lagging pair
    assert signals.cache_capacity_tokens == 2 * 160_000
    assert signals.kv_usage == pytest.approx((0.50 + 0.25) / 2)
    assert (signals.prompt_tokens, signals.prefix_hits) == (800_000.0, 500_000.0)  # engine-wide counters


def test_each_dp_rank_the_router_splits_off_reads_its_own_scheduler_once() -> None:
    families = parse_metrics(FIXTURE.read_text(), sglang.ADAPTER.wanted_metrics)
    split = split_by_rank(families, (0, 1), sglang.ADAPTER.dp_rank_label)
    assert split is not None
    by_rank = {rank: sglang.ADAPTER.signals(f) for rank, f in split.items()}
    assert [(s.running, s.queue, s.cache_capacity_tokens) for s in by_rank.values()] == [
        (40.0, 3.0, 160_000),
        (24.0, 2.0, 160_000),
    ]
    assert [s.kv_usage for s in by_rank.values()] == pytest.approx([0.50, 0.25])


def test_a_nan_copy_is_skipped_not_propagated() -> None:
    text = _gauges(1, 5, 1, 0.5, 1000) + (
        'sglang:num_running_reqs{engine_type="unified",model_name="m",pp_rank="0",tp_rank="1"} NaN\n'
    )
    assert sglang.ADAPTER.signals(parse_metrics(text)).running == 5.0


def test_expert_parallel_copies_differ_in_moe_ep_rank_and_still_read_as_one() -> None:
    # 0.5.15/0.5.23 SchedulerMetricsCollector labels every scheduler with moe_ep_rank as well; with EP=TP=4
    # and --enable-metrics-for-all-schedulers each TP copy has its own moe_ep_rank.
    labels = 'engine_type="unified",model_name="m",moe_ep_rank="{0}",pp_rank="0",tp_rank="{0}"'
    text = "".join(
        f"sglang:num_queue_reqs{{{labels.format(r)}}} 6\nsglang:num_running_reqs{{{labels.format(r)}}} 30\n"
        for r in range(4)
    )
    signals = sglang.ADAPTER.signals(parse_metrics(text))
    assert (signals.queue, signals.running) == (6.0, 30.0)


def test_priority_shares_are_not_added_to_their_total() -> None:
    # --enable-priority-scheduling (0.5.15/0.5.23 _log_gauge_queue_count): the total under priority="",
    # each priority's share under priority="<n>".
    base = 'engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",tp_rank="0"'
    text = "".join(
        f'sglang:num_queue_reqs{{{base},dp_rank="{dp}",priority="{p}"}} {n}\n'
        for dp, p, n in ((0, "", 5), (0, "0", 3), (0, "1", 2), (1, "", 4), (1, "0", 4))
    )
    assert sglang.ADAPTER.signals(parse_metrics(text)).queue == 9.0
