"""Properties of ``desired_replicas``: bounds, no flapping on a constant signal, ratio band, whole groups."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st
from policykit import Signals, grouped, pool, run

from infctl.autoscaler.policy import desired_replicas, replicas_by_role
from infctl.autoscaler.schedule import ScheduleWindow
from infctl.autoscaler.settings import PolicyConfig, UnitConfig, in_band
from infctl.autoscaler.snapshot import (
    ReplicaSignals,
    ScalerState,
    ScalingSnapshot,
    UnitState,
    UnitStatus,
)

ROLES = ("both", "prefill", "decode")


@st.composite
def configs(draw: st.DrawFn) -> PolicyConfig:
    mode = draw(st.sampled_from(["aggregated", "pool", "group"]))

    def bounds() -> tuple[int, int]:
        lo = draw(st.integers(1, 6))
        return lo, draw(st.integers(lo, 12))

    q_down = draw(st.floats(0, 10))
    kv_down = draw(st.floats(0, 0.8))
    common = {
        "queue_down": q_down,
        "queue_up": q_down + draw(st.floats(0.5, 20)),
        "kv_down": kv_down,
        "kv_up": draw(st.floats(kv_down + 0.05, 1.0)),
        "max_step_up": draw(st.integers(1, 5)),
        "max_step_down": draw(st.integers(1, 3)),
        "up_window_s": draw(st.sampled_from([0.0, 30.0])),
        "down_window_s": draw(st.sampled_from([0.0, 60.0])),
        "up_cooldown_s": draw(st.sampled_from([0.0, 30.0])),
        "down_cooldown_s": draw(st.sampled_from([0.0, 90.0])),
        "ttft_slo_s": draw(st.sampled_from([None, 1.0])),
        "schedules": tuple(
            draw(
                st.lists(
                    st.builds(
                        ScheduleWindow,
                        st.integers(0, 86399),
                        st.integers(0, 86399),
                        st.integers(0, 15),
                        st.sampled_from([None, "both", "prefill", "decode", "group"]),
                    ),
                    max_size=2,
                )
            )
        ),
    }
    if mode == "aggregated":
        return PolicyConfig(units=(UnitConfig("both", *bounds()),), **common)
    if mode == "group":
        members = (("prefill", draw(st.integers(1, 3))), ("decode", draw(st.integers(1, 4))))
        return PolicyConfig(units=(UnitConfig("group", *bounds(), members=members),), **common)
    p, d = bounds(), bounds()
    lo = draw(st.floats(0.1, 2.0))
    ratio = draw(st.sampled_from([None, (lo, lo * draw(st.floats(1.0, 4.0)))]))
    units = (
        UnitConfig("prefill", *p, members=(("prefill", 1),)),
        UnitConfig("decode", *d, members=(("decode", 1),)),
    )
    try:
        return PolicyConfig(units=units, ratio=ratio, **common)
    except Exception:  # an infeasible band is rejected at build time; use none
        return PolicyConfig(units=units, **common)


replica = st.builds(
    ReplicaSignals,
    name=st.text(max_size=3),
    role=st.sampled_from(ROLES),
    ready=st.booleans(),
    queue=st.floats(0, 200),
    running=st.floats(0, 64),
    kv_usage=st.floats(0, 1),
)
statuses = st.builds(lambda d, r: UnitStatus(d, min(d, r)), st.integers(0, 20), st.integers(0, 20))
memories = st.builds(
    UnitState, st.none() | st.floats(0, 1000), st.none() | st.floats(0, 1000), st.none() | st.floats(0, 1000)
)


@settings(max_examples=300, deadline=None)
@given(
    configs(),
    st.lists(replica, max_size=30),
    st.floats(0, 100),
    st.none() | st.floats(0, 10),
    st.none() | st.floats(0, 86400),
    st.data(),
)
def test_every_recommendation_is_within_its_units_bounds(cfg, replicas, router_q, ttft, tod, data) -> None:
    current = {u.name: data.draw(statuses) for u in cfg.units}
    state = ScalerState(tuple((u.name, data.draw(memories)) for u in cfg.units))
    snap = ScalingSnapshot(
        now=1000.0, replicas=tuple(replicas), router_queue=router_q, ttft_p99_s=ttft, time_of_day_s=tod
    )
    decision = desired_replicas(snap, current, cfg, state)
    assert {r.role for r in decision.recommendations} == {u.name for u in cfg.units}
    for rec in decision.recommendations:
        unit = cfg.unit(rec.role)
        assert unit.min <= rec.desired <= unit.max, rec
    if cfg.ratio is not None:
        counts = replicas_by_role(decision.desired(), cfg)
        assert in_band(counts["prefill"], counts["decode"], cfg.ratio), (counts, cfg.ratio)


def _monotone(series: list[int]) -> bool:
    moves = {(b > a) - (b < a) for a, b in itertools.pairwise(series)} - {0}
    return len(moves) <= 1


@settings(max_examples=150, deadline=None)
@given(configs(), st.floats(0, 100), st.floats(0, 3), st.booleans(), st.data())
def test_a_constant_signal_never_flaps(cfg, queue, kv, spread, data) -> None:
    """Constant per replica (spread=False), or a constant total spread over however many replicas run."""
    start = {u.name: data.draw(st.integers(u.min, u.max)) for u in cfg.units}

    def signals(unit: str, role: str, counts: dict[str, int]) -> dict[str, float]:
        n = counts[unit] * cfg.unit(unit).per_unit(role)
        return (
            {"queue": queue / n, "kv_usage": min(1.0, kv / n)}
            if spread
            else {"queue": queue, "kv_usage": min(1.0, kv)}
        )

    cfg_no_schedule = PolicyConfig(
        **{**{f: getattr(cfg, f) for f in cfg.__dataclass_fields__}, "schedules": ()}
    )
    seen = run(cfg_no_schedule, start, signals, ticks=40)
    for unit in cfg.units:
        series = [c[unit.name] for c in seen[1:]]  # the first decision may fix an out-of-band start
        assert _monotone(series), (unit.name, [c[unit.name] for c in seen])


@settings(max_examples=100, deadline=None)
@given(st.floats(0, 60), st.floats(0, 60), st.integers(1, 6), st.integers(1, 6), st.data())
def test_pool_ratio_band_is_kept_while_both_move(q_prefill, q_decode, p0, d0, data) -> None:
    cfg = pool((1, 8), (1, 12), ratio=(0.25, 1.0), down_window_s=0, down_cooldown_s=0, up_cooldown_s=0)
    load: Signals = lambda unit, role, counts: {"queue": (q_prefill if role == "prefill" else q_decode)}  # noqa: E731
    for counts in run(cfg, {"prefill": p0, "decode": d0}, load, ticks=12)[1:]:
        assert in_band(counts["prefill"], counts["decode"], (0.25, 1.0)), counts


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 3), st.integers(1, 4), st.floats(0, 80), st.floats(0, 1), st.integers(1, 5))
def test_group_mode_moves_whole_groups(p, d, queue, kv, start) -> None:
    cfg = grouped((p, d), (1, 6), down_window_s=0, down_cooldown_s=0, up_cooldown_s=0)
    signals: Signals = lambda unit, role, counts: {"queue": queue, "kv_usage": kv}  # noqa: E731
    for counts in run(cfg, {"group": start}, signals, ticks=8):
        by_role = replicas_by_role(counts, cfg)
        assert by_role == {"prefill": counts["group"] * p, "decode": counts["group"] * d}
