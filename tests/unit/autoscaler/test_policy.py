"""The scaling decision on hand-picked situations: each rule of ``desired_replicas`` once."""

from __future__ import annotations

from policykit import aggregated, decide, grouped, pool

from infctl.autoscaler.policy import replicas_by_role
from infctl.autoscaler.schedule import parse_window
from infctl.autoscaler.snapshot import ScalerState, UnitState


def only(decision):  # type: ignore[no-untyped-def]
    (rec,) = decision.recommendations
    return rec


def test_scales_up_at_once_to_what_the_queue_needs() -> None:
    rec = only(decide(aggregated(max_step_up=10), {"both": 2}, queue=20))
    # 40 waiting requests at 8 per replica need 5 replicas.
    assert (rec.current, rec.desired) == (2, 5)
    assert "queue/replica 20.00 > 8" in rec.reason
    assert dict(rec.inputs)["needed"] == 5


def test_scale_up_is_limited_by_max_step_and_max() -> None:
    assert only(decide(aggregated(max_step_up=2), {"both": 2}, queue=40)).desired == 4
    rec = only(decide(aggregated(hi=3, max_step_up=8), {"both": 2}, queue=40))
    assert rec.desired == 3 and "capped at max 3" in rec.reason


def test_kv_usage_alone_scales_up() -> None:
    rec = only(decide(aggregated(), {"both": 2}, kv_usage=0.95))
    assert rec.desired == 3 and "KV 95% > 85%" in rec.reason


def test_the_routers_queue_counts_against_the_entry_role() -> None:
    decision = decide(pool(), {"prefill": 2, "decode": 2}, router_queue=40)
    assert decision.desired() == {"prefill": 5, "decode": 2}


def test_ttft_over_the_slo_scales_the_entry_role() -> None:
    # Scaled by the overshoot, as the HPA scales on any metric: 2 x 2.5 s / 1 s -> 5.
    decision = decide(pool(ttft_slo_s=1.0), {"prefill": 2, "decode": 2}, ttft=2.5)
    assert decision.desired() == {"prefill": 5, "decode": 2}
    assert "TTFT p99 2.50s > SLO 1s" in decision.recommendations[0].reason


def test_no_new_scale_up_while_replicas_are_pending() -> None:
    rec = only(decide(aggregated(), {"both": 4}, ready={"both": 2}, queue=30))
    assert rec.desired == 4 and "2 pending" in rec.reason


def test_unready_replicas_are_not_capacity() -> None:
    # Four asked for, two ready: the two carry the whole queue and nothing is pending past the ask.
    rec = only(decide(aggregated(), {"both": 4}, ready={"both": 2}, queue=2))
    assert dict(rec.inputs)["ready"] == 2 and dict(rec.inputs)["queue_per_replica"] == 2


def test_scale_down_waits_for_the_window_then_steps_by_one() -> None:
    cfg = aggregated(down_window_s=300)
    first = decide(cfg, {"both": 5}, now=0, queue=0.1)
    assert only(first).desired == 5 and "0s of the 300s window" in only(first).reason
    mid = decide(cfg, {"both": 5}, now=200, state=first.state, queue=0.1)
    assert only(mid).desired == 5
    done = decide(cfg, {"both": 5}, now=300, state=mid.state, queue=0.1)
    assert only(done).desired == 4
    # The window starts over after a step down.
    again = decide(cfg, {"both": 4}, now=330, state=done.state, queue=0.1)
    assert only(again).desired == 4


def test_a_spike_inside_the_window_restarts_it() -> None:
    cfg = aggregated(down_window_s=300, up_cooldown_s=0)
    s1 = decide(cfg, {"both": 5}, now=0, queue=0.1).state
    s2 = decide(cfg, {"both": 5}, now=100, state=s1, queue=5).state  # neither low nor high
    rec = only(decide(cfg, {"both": 5}, now=320, state=s2, queue=0.1))
    assert rec.desired == 5


def test_cooldowns_count_from_the_last_change() -> None:
    state = ScalerState().with_unit("both", UnitState(last_scale_at=990))
    rec = only(decide(aggregated(up_cooldown_s=30), {"both": 2}, now=1000, state=state, queue=20))
    assert rec.desired == 2 and "cooling down" in rec.reason
    assert (
        only(decide(aggregated(up_cooldown_s=30), {"both": 2}, now=1021, state=state, queue=20)).desired > 2
    )


def test_never_scales_down_below_what_the_load_needs() -> None:
    # 10 waiting in total over 3 replicas is 3.3 each: low for the down level 4, but 2 replicas would
    # carry 5 each, over the up level 4.
    cfg = aggregated(queue_up=4, queue_down=3.5, down_window_s=0, down_cooldown_s=0)
    rec = only(decide(cfg, {"both": 3}, queue=10 / 3))
    assert rec.desired == 3 and "the load needs 3" in rec.reason


def test_no_signals_hold() -> None:
    rec = only(decide(aggregated(), {"both": 3}, ready={"both": 0}))
    assert rec.desired == 3 and "no signals" in rec.reason


def test_min_and_schedule_floors() -> None:
    night = parse_window("22:00-06:00 min=3")
    cfg = aggregated(lo=1, hi=6, schedules=(night,), down_window_s=0, down_cooldown_s=0)
    at_night = only(decide(cfg, {"both": 1}, tod=23 * 3600, queue=0))
    assert at_night.desired == 3 and "schedule 22:00-06:00 min=3" in at_night.reason
    by_day = only(decide(cfg, {"both": 3}, tod=12 * 3600, queue=0))
    assert by_day.desired == 2
    assert only(decide(aggregated(lo=2), {"both": 1}, queue=3)).desired == 2


def test_ratio_band_raises_decode_with_prefill() -> None:
    cfg = pool(ratio=(0.5, 1.0), max_step_up=8)
    decision = decide(cfg, {"prefill": 2, "decode": 2}, router_queue=48)
    assert decision.desired() == {"prefill": 6, "decode": 6}
    assert "ratio band 0.5-1" in decision.recommendations[1].reason


def test_group_mode_moves_whole_groups() -> None:
    cfg = grouped(per_group=(1, 2))
    # 2 groups hold 2 prefill and 4 decode replicas with 20 waiting each: 40 and 80 waiting need 5 prefill
    # and 10 decode replicas at 8 each, so 5 groups.
    decision = decide(cfg, {"group": 2}, queue=20)
    assert decision.desired() == {"group": 5}
    assert replicas_by_role(decision.desired(), cfg) == {"prefill": 5, "decode": 10}


def test_scale_up_cooldown_also_counts_from_when_pending_replicas_became_ready() -> None:
    cfg = aggregated(up_cooldown_s=30)
    waiting = decide(cfg, {"both": 4}, ready={"both": 2}, now=100, queue=30)
    assert "pending" in only(waiting).reason
    settled = decide(cfg, {"both": 4}, now=200, state=waiting.state, queue=30)
    assert only(settled).desired == 4 and "cooling down (0s of 30s)" in only(settled).reason
    later = decide(cfg, {"both": 4}, now=230, state=settled.state, queue=30)
    assert only(later).desired > 4


def test_no_scale_down_while_ttft_is_near_the_slo() -> None:
    cfg = aggregated(ttft_slo_s=2.0, ttft_down=0.5, down_window_s=0, down_cooldown_s=0)
    held = only(decide(cfg, {"both": 4}, queue=0.1, ttft=1.5))
    assert held.desired == 4 and "TTFT p99 1.50s is over 0.5 x the SLO" in held.reason
    assert only(decide(cfg, {"both": 4}, queue=0.1, ttft=0.8)).desired == 3
