"""The KEDA-style threshold policy: the HPA's formula, tolerance, scale-up limit and scale-down window."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infctl.autoscaler.settings import UnitConfig
from infctl.autoscaler.snapshot import Decision, ReplicaSignals, ScalerState, ScalingSnapshot, UnitStatus
from infctl.autoscaler.threshold import ThresholdConfig, threshold_replicas
from infctl.errors import ConfigError

CONFIG = ThresholdConfig(units=(UnitConfig("both", 1, 20),), target=2.0, stabilization_s=300.0)


def decide(
    queue: float,
    desired: int,
    ready: int | None = None,
    *,
    now: float = 0.0,
    state: ScalerState | None = None,
) -> Decision:
    ready = desired if ready is None else ready
    snap = ScalingSnapshot(
        now=now, replicas=tuple(ReplicaSignals(f"r{i}", "both", queue=queue) for i in range(ready))
    )
    return threshold_replicas(snap, {"both": UnitStatus(desired, ready)}, CONFIG, state or ScalerState())


def test_desired_is_ready_times_metric_over_target() -> None:
    assert decide(6.0, 3).desired() == {"both": 7}  # ceil(3 * 6 / 2) = 9, limited to 3 + 4
    assert decide(3.0, 4).desired() == {"both": 6}
    assert decide(2.1, 4).desired() == {"both": 4}  # within the 10% tolerance


def test_scale_down_takes_the_highest_recommendation_of_the_window() -> None:
    d = decide(4.0, 4, now=0.0)  # recommends 8
    state = d.state
    d = decide(0.0, 4, now=100.0, state=state)
    assert d.desired() == {"both": 4}  # 8 was recommended 100 s ago: no scale-down
    d = decide(0.0, 4, now=400.0, state=d.state)
    assert d.desired() == {"both": 1}  # only zeros left in the window: down to min


def test_no_metric_no_change_and_bad_settings_refused() -> None:
    assert decide(5.0, 3, ready=0).desired() == {"both": 3}
    with pytest.raises(ConfigError):
        ThresholdConfig(units=(), target=0.0)
    assert CONFIG.scaled(0.1).stabilization_s == pytest.approx(30.0)


@given(
    st.lists(st.tuples(st.floats(0, 50), st.integers(0, 3)), max_size=30),
    st.integers(1, 5),
    st.integers(5, 15),
)
def test_counts_stay_within_bounds(ticks: list[tuple[float, int]], lo: int, hi: int) -> None:
    config = ThresholdConfig(units=(UnitConfig("both", lo, hi),), stabilization_s=60.0)
    state, desired, now = ScalerState(), lo, 0.0
    for queue, unready in ticks:
        ready = max(0, desired - unready)
        snap = ScalingSnapshot(
            now=now, replicas=tuple(ReplicaSignals(f"r{i}", "both", queue=queue) for i in range(ready))
        )
        d = threshold_replicas(snap, {"both": UnitStatus(desired, ready)}, config, state)
        state, desired, now = d.state, d.desired()["both"], now + 15.0
        assert lo <= desired <= hi
