"""Cutover state in annotations and the pure decisions: next weight, rollback target, command transitions."""

from __future__ import annotations

from dataclasses import replace
from itertools import pairwise

from hypothesis import given
from hypothesis import strategies as st

from infctl.cutover import decide
from infctl.cutover.gates import GateResult
from infctl.cutover.plan import Plan
from infctl.cutover.state import PREFIX, CutoverState, Entry, from_annotations

PLAN = Plan((2, 5, 10, 20, 40), 600)
PASS = (GateResult("error_rate<1%", 0.0, 0.01, True, "error_rate 0% < 1%"),)
FAIL = (GateResult("error_rate<1%", 0.5, 0.01, False, "error_rate 50% >= 1%"),)
UNSURE = (GateResult("error_rate<1%", None, None, None, "3 requests on new"),)
OUTCOMES = st.sampled_from([PASS, FAIL, UNSURE])


def started(percent: int = 0) -> CutoverState:
    return decide.begin(CutoverState(percent=percent), PLAN, "error_rate<1%", walker="w", now=0, actor="me")


def run(state: CutoverState, outcomes: list[tuple[GateResult, ...]]) -> list[CutoverState]:
    """Every state a walk goes through, window after window, until it ends."""
    states = [state]
    for i, results in enumerate(outcomes):
        d = decide.next_weight(state, PLAN, results)
        state = decide.apply(state, d, results, now=600.0 * (i + 1), actor="me")
        states.append(state)
        if d.action in ("rollback", "complete"):
            break
    return states


def test_begin_from_zero_takes_the_first_step_and_from_a_share_stays() -> None:
    assert started().percent == 2 and started().phase == "walking" and started().history[-1].action == "start"
    assert started(10).percent == 10


def test_a_passing_walk_climbs_every_step_then_completes() -> None:
    states = run(started(), [PASS] * 10)
    assert [s.percent for s in states] == [2, 5, 10, 20, 40, 40]
    assert states[-1].phase == "complete"
    assert [e.action for e in states[-1].history] == ["start", "advance", "advance", "advance", "advance",
                                                      "complete"]  # fmt: skip


def test_failure_rolls_back_to_the_last_good_step_with_the_reason() -> None:
    states = run(started(), [PASS, PASS, FAIL])
    last = states[-1]
    assert [s.percent for s in states] == [2, 5, 10, 5]
    assert last.phase == "rolled-back"
    assert last.history[-1].reason == "gate failed at 10%: error_rate 50% >= 1%; back to 5%"
    assert run(started(), [FAIL])[-1].percent == 0
    assert run(started(10), [FAIL])[-1].percent == 0  # 10% was set by hand: never judged good


def test_inconclusive_window_holds_without_a_history_entry() -> None:
    s = started()
    d = decide.next_weight(s, PLAN, UNSURE)
    assert d.action == "hold" and d.percent == 2 and decide.apply(s, d, UNSURE, 1, "me") is s


@given(st.lists(OUTCOMES, max_size=12))
def test_rollback_never_goes_above_the_failed_step(outcomes: list[tuple[GateResult, ...]]) -> None:
    states = run(started(), outcomes)
    for before, after in pairwise(states):
        if after.phase == "rolled-back":
            assert after.percent < before.percent
            good = {e.previous for e in after.history if e.action == "advance"}
            assert after.percent in good | {0}
        else:
            assert after.percent >= before.percent


@given(st.lists(OUTCOMES, max_size=12), st.sampled_from(["pause", "set", "rollback"]))
def test_history_is_append_only(outcomes: list[tuple[GateResult, ...]], command: str) -> None:
    states = run(started(), outcomes)
    final = states[-1]
    changed = {"pause": decide.pause, "rollback": decide.rollback}.get(command)
    if changed is None:
        nxt = decide.set_percent(final, 33, now=1e6, actor="you")
    else:
        nxt = changed(final, now=1e6, actor="you")
    states.append(nxt or final)
    for before, after in pairwise(states):
        assert after.history[: len(before.history)] == before.history
        assert len(after.history) - len(before.history) in (0, 1)


def test_commands_are_idempotent() -> None:
    s = decide.set_percent(CutoverState(), 40, now=1, actor="me")
    assert s is not None and s.percent == 40 and s.phase == "manual"
    assert decide.set_percent(s, 40, now=2, actor="me") is None
    p = decide.pause(s, now=3, actor="me")
    assert p is not None and p.paused and decide.pause(p, now=4, actor="me") is None
    r = decide.rollback(s, now=5, actor="me")
    assert r is not None and r.percent == 0 and decide.rollback(r, now=6, actor="me") is None
    walking = started()
    assert decide.set_percent(walking, walking.percent, now=7, actor="me") is not None  # ends the walk


def test_share_check_fails_a_group_that_took_nothing() -> None:
    assert decide.share_check(10, 0, 1000, 20).passed is False
    assert decide.share_check(10, 95, 1000, 20).passed is True
    assert decide.share_check(2, 0, 100, 20).passed is True  # expected 2: too little to judge
    assert decide.share_check(2, 8, 1000, 20).passed is True  # 8 of expected 20 is within chance


entries = st.builds(
    Entry, time=st.integers(0, 2_000_000_000).map(float), action=st.sampled_from(["set", "advance"]),
    percent=st.integers(0, 100), previous=st.integers(0, 100), actor=st.text(max_size=8),
    reason=st.text(max_size=20), gates=st.just(({"gate": "share", "passed": True},)),
)  # fmt: skip


@given(
    st.integers(0, 100), st.sampled_from(["idle", "manual", "walking", "complete", "rolled-back"]),
    st.booleans(), st.lists(entries, max_size=5), st.sampled_from(["", "ttft_p99<2s,error_rate<1%"]),
)  # fmt: skip
def test_state_round_trips_through_annotations(
    percent: int, phase: str, paused: bool, history: list[Entry], gates: str
) -> None:
    state = CutoverState(percent=percent, phase=phase, paused=paused, steps=(2, 5), interval_s=0.5,
                         gates=gates, old="old", new="new", walker="me/1", actor="me", updated=12.0,
                         history=tuple(history))  # fmt: skip
    annotations = state.to_annotations()
    assert all(k.startswith(PREFIX) and isinstance(v, str) for k, v in annotations.items())
    assert from_annotations({**annotations, "other": "kept elsewhere"}) == state


def test_no_annotations_is_the_idle_state() -> None:
    assert from_annotations({"kubectl.kubernetes.io/last-applied-configuration": "{}"}) == CutoverState()


def test_rollback_at_zero_with_no_walk_records_nothing() -> None:
    """A "rollback 0% -> 0%" would record nothing happening: at 0% with no walk to end there is nothing to
    roll back, whatever the phase says; ending a walk that stands at 0% (weights edited by hand) says so."""
    manual_zero = decide.set_percent(CutoverState(percent=40, phase="manual"), 0, now=1, actor="me")
    assert manual_zero is not None and manual_zero.phase == "manual"
    assert decide.rollback(manual_zero, now=2, actor="me") is None
    stuck = replace(started(), percent=0)
    ended = decide.rollback(stuck, now=3, actor="me")
    assert ended is not None and ended.walker == "" and "already at 0%" in ended.history[-1].reason


def test_a_split_nobody_set_is_pinned_by_the_first_command() -> None:
    """The router shares by capacity until weights are set (``pinned`` False): --percent at the same share
    still writes it, and a walk starts at its first step rather than reading a window where it stands."""
    shared = CutoverState(percent=50)
    assert decide.set_percent(shared, 50, now=1, actor="me") is None
    pinned = decide.set_percent(shared, 50, now=1, actor="me", pinned=False)
    assert pinned is not None and pinned.history[-1].previous == 50
    walk = decide.begin(shared, PLAN, "", walker="w", now=2, actor="me", pinned=False)
    assert (walk.percent, walk.history[-1].previous) == (2, 50)
    assert decide.begin(shared, PLAN, "", walker="w", now=2, actor="me").percent == 50
