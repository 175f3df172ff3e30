from hypothesis import given
from hypothesis import strategies as st

from infctl.local.backoff import next_restart
from infctl.local.settings import SupervisorSettings

SETTINGS = SupervisorSettings(backoff_initial=0.5, backoff_factor=2.0, backoff_max=30.0, stable_after=60.0)


def test_delay_doubles_from_half_a_second_to_the_cap() -> None:
    streak, delays = 0, []
    for _ in range(9):
        decision = next_restart(streak, uptime=1.0, settings=SETTINGS)
        streak = decision.streak
        delays.append(decision.delay)
    assert delays == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]
    assert streak == 9


def test_a_stable_run_resets_the_backoff() -> None:
    decision = next_restart(streak=7, uptime=60.0, settings=SETTINGS)
    assert decision.delay == 0.5
    assert decision.streak == 1


def test_a_short_run_keeps_backing_off() -> None:
    assert next_restart(streak=2, uptime=59.9, settings=SETTINGS).delay == 2.0


@given(streak=st.integers(min_value=0, max_value=10_000), uptime=st.floats(min_value=0, max_value=1e6))
def test_delay_stays_within_bounds(streak: int, uptime: float) -> None:
    decision = next_restart(streak, uptime, SETTINGS)
    assert SETTINGS.backoff_initial <= decision.delay <= SETTINGS.backoff_max
    assert decision.streak >= 1
