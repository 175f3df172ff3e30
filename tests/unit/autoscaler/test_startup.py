"""Start-up bookkeeping (:mod:`infctl.autoscaler.startup`): replicas asked for, matched to readiness."""

from __future__ import annotations

from infctl.autoscaler.snapshot import UnitStatus
from infctl.autoscaler.startup import RECENT, Ledger, asked, observed, over_hold


def seen(
    desired: int, ready: int, at: float, ledger: Ledger | None = None
) -> tuple[Ledger, tuple[float, ...]]:
    return observed(ledger or Ledger(), UnitStatus(desired, ready), at)


def test_a_replica_asked_at_t_and_ready_at_t_plus_s_started_in_s() -> None:
    ledger, _ = seen(0, 0, 0.0)
    ledger = asked(ledger, 1, 10.0)
    ledger, samples = seen(1, 0, 25.0, ledger)
    assert samples == ()  # still starting
    ledger, samples = seen(1, 1, 100.0, ledger)
    assert samples == (90.0,)
    assert ledger.longest == 90.0 and ledger.waiting == ()


def test_the_oldest_asks_are_served_first() -> None:
    ledger, _ = seen(1, 1, 0.0)
    ledger = asked(ledger, 2, 10.0)
    ledger = asked(ledger, 4, 20.0)
    ledger, samples = seen(4, 3, 50.0, ledger)
    assert samples == (40.0, 30.0)
    ledger, samples = seen(4, 4, 60.0, ledger)
    assert samples == (40.0,)


def test_replicas_removed_before_ready_give_nothing() -> None:
    ledger, _ = seen(1, 1, 0.0)
    ledger = asked(ledger, 2, 10.0)
    ledger = asked(ledger, 3, 20.0)
    ledger = asked(ledger, 1, 30.0)  # both new ones taken back before they served
    ledger, samples = seen(1, 1, 40.0, ledger)
    assert samples == () and ledger.waiting == ()


def test_a_scale_down_takes_back_the_newest_ask() -> None:
    ledger, _ = seen(0, 0, 0.0)
    ledger = asked(ledger, 1, 10.0)
    ledger = asked(ledger, 2, 20.0)
    ledger = asked(ledger, 1, 30.0)
    _, samples = seen(1, 1, 70.0, ledger)
    assert samples == (60.0,)


def test_a_draining_replica_still_ready_is_no_start_up() -> None:
    ledger, _ = seen(2, 2, 0.0)
    ledger = asked(ledger, 1, 10.0)
    ledger, samples = seen(1, 2, 20.0, ledger)  # the removed one drains, still ready
    assert samples == () and ledger.waiting == ()
    _, samples = seen(1, 1, 30.0, ledger)
    assert samples == ()


def test_a_replica_unready_while_the_count_holds_is_no_start_up() -> None:
    ledger, _ = seen(2, 2, 0.0)
    ledger, samples = seen(2, 1, 30.0, ledger)  # a restart or a readiness blip; nobody asked for anything
    assert samples == ()
    ledger, samples = seen(2, 1, 245.0, ledger)
    assert samples == ()
    ledger, samples = seen(2, 2, 275.0, ledger)
    assert samples == () and ledger.longest is None and not over_hold(ledger, 180.0)
    # A scale-up after it is timed as before.
    ledger = asked(ledger, 3, 300.0)
    ledger, samples = seen(3, 3, 500.0, ledger)
    assert samples == (200.0,) and over_hold(ledger, 180.0)


def test_replicas_pending_when_first_seen_give_nothing() -> None:
    ledger, _ = seen(3, 1, 0.0)
    ledger, samples = seen(3, 3, 50.0, ledger)
    assert samples == () and ledger.longest is None


def test_a_rise_the_daemon_did_not_make_is_timed_from_when_it_was_seen() -> None:
    ledger, _ = seen(1, 1, 0.0)
    ledger, _ = seen(2, 1, 15.0, ledger)  # another scaler asked for one more
    _, samples = seen(2, 2, 45.0, ledger)
    assert samples == (30.0,)
    # Asked for and ready between two observations: its start-up is not known.
    ledger, _ = seen(1, 1, 0.0)
    _, samples = seen(2, 2, 15.0, ledger)
    assert samples == ()


def test_the_daemons_own_ask_is_not_counted_again_when_observed() -> None:
    ledger, _ = seen(0, 0, 0.0)
    ledger = asked(ledger, 2, 10.0)
    ledger, _ = seen(2, 0, 20.0, ledger)
    assert ledger.waiting == (10.0, 10.0)


def test_longest_and_over_hold_look_at_recent_start_ups_only() -> None:
    ledger, _ = seen(0, 0, 0.0)
    t = 0.0
    for startup in (200.0, *[30.0] * RECENT):
        ledger = asked(ledger, 1, t)
        ledger, _ = seen(1, 1, t + startup, ledger)
        if startup == 200.0:
            assert ledger.longest == 200.0
            assert over_hold(ledger, 180.0) and not over_hold(ledger, 200.0)
        ledger = asked(ledger, 0, t + startup)
        ledger, _ = seen(0, 0, t + startup + 1, ledger)
        t += 1000.0
    assert ledger.longest == 30.0 and not over_hold(ledger, 180.0)
    assert not over_hold(Ledger(), 0.001)
