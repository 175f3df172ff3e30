"""The walk on a fake clock over an in-memory traffic object and scripted gate windows."""

from __future__ import annotations

from typing import Any

import pytest
from cutoverkit import FakeClock, MemoryBackend, ScriptedSource, healthy

from infctl.cutover import (
    Plan,
    StaleStateError,
    WalkOptions,
    WalkSettings,
    decide,
    from_annotations,
    pause,
    resume,
    set_percent,
    walk,
)
from infctl.cutover.gates import GroupStats
from infctl.cutover.ops import change

PLAN = Plan((2, 5, 10), 60)
GOOD = {"old": healthy(900), "new": healthy(100)}
BAD = {"old": healthy(900), "new": healthy(100, errors=40)}


async def run(backend: MemoryBackend, windows: list[dict[str, GroupStats]], clock: FakeClock | None = None,
              gates: str = "error_rate<1%,ttft_p99<old*1.5", **kw: Any) -> Any:  # fmt: skip
    clock = clock or FakeClock()
    events: list[tuple[str, dict[str, Any]]] = []
    settings = WalkSettings(PLAN, gates, WalkOptions(check_every_s=30))
    report = await walk(backend, lambda groups: ScriptedSource(windows, groups=groups), settings, old=None,
                        new=None, actor="alice@ops", clock=clock, on_event=lambda k, d: events.append((k, d)),
                        **kw)  # fmt: skip
    return report, events, clock


async def test_passing_walk_writes_each_step_and_completes() -> None:
    backend = MemoryBackend()
    report, events, clock = await run(backend, [GOOD])
    assert report.outcome == "complete"
    assert [w["new"] for w in backend.writes] == [2, 5, 10, 10]
    assert all(sum(w.values()) == 100 for w in backend.writes)
    assert clock.slept == [30, 30] * 3  # three windows of 60 s, re-reading every 30 s
    state = from_annotations(backend.annotations)
    assert state.phase == "complete" and state.percent == 10 and state.actor == "alice@ops"
    assert [e.action for e in state.history] == ["start", "advance", "advance", "complete"]
    assert [k for k, _ in events] == ["start", "wait", "window", "wait", "window", "wait", "window"]
    again, events, _ = await run(backend, [GOOD])
    assert again.outcome == "complete" and events == [] and len(backend.writes) == 4  # idempotent


async def test_failing_gate_rolls_back_within_one_interval_and_says_why() -> None:
    backend = MemoryBackend()
    report, _, _ = await run(backend, [GOOD, BAD])
    assert report.outcome == "rolled-back"
    assert [w["new"] for w in backend.writes] == [2, 5, 2]
    state = from_annotations(backend.annotations)
    step, back = state.history[-2], state.history[-1]
    assert back.action == "rollback" and back.time - step.time == PLAN.interval_s
    assert report.reason == "gate failed at 5%: error_rate 40% >= 1%; back to 2%"
    assert any(g["gate"] == "error_rate<1%" and g["passed"] is False for g in back.gates)


async def test_new_group_that_gets_no_traffic_fails_the_share_check() -> None:
    backend = MemoryBackend()
    ejected = {"old": healthy(1000), "new": GroupStats()}
    report, _, _ = await run(backend, [ejected], gates="error_rate<1%")
    assert report.outcome == "rolled-back" and backend.weights["new"] == 0
    assert "share: new took 0.0% of 1000 requests at 2%" in report.reason


async def test_inconclusive_window_holds_then_advances() -> None:
    backend = MemoryBackend()
    quiet = {"old": healthy(30), "new": healthy(3)}
    report, events, _ = await run(backend, [quiet, GOOD, GOOD, GOOD])
    decisions = [d["decision"] for k, d in events if k == "window"]
    assert decisions == ["hold", "advance", "advance", "complete"] and report.outcome == "complete"


async def test_a_pause_by_someone_else_stops_the_walk_at_its_next_check() -> None:
    backend = MemoryBackend()
    clock = FakeClock()

    def operator_pauses(t: float) -> None:
        if len(clock.slept) == 3:  # half way through the second window, as `--pause` would
            backend.annotations["infctl.io/cutover-paused"] = "true"
            backend.version += 1

    clock.on_sleep = operator_pauses
    report, events, _ = await run(backend, [GOOD], clock=clock)
    assert report.outcome == "stopped" and "paused" in report.reason
    assert [w["new"] for w in backend.writes] == [2, 5]
    assert events[-1][0] == "stopped"


async def test_resume_continues_the_walk_from_where_it_stood() -> None:
    backend = MemoryBackend()
    clock = FakeClock()
    first = await run(backend, [GOOD, BAD], clock=clock)
    assert first[0].outcome == "rolled-back" and backend.weights["new"] == 2
    await pause(backend, old=None, new=None, now=clock.now(), actor="bob")
    again = await resume(backend, lambda g: ScriptedSource([GOOD]), old=None, new=None, actor="bob",
                         clock=clock, options=WalkOptions(check_every_s=60))  # fmt: skip
    assert again.to_dict()["outcome"] == "complete"
    state = from_annotations(backend.annotations)
    assert [w["new"] for w in backend.writes][-3:] == [5, 10, 10]
    assert "resume" in [e.action for e in state.history] and not state.paused


async def test_dry_run_writes_nothing_and_shows_the_timeline() -> None:
    backend = MemoryBackend()
    report, events, clock = await run(backend, [GOOD], dry_run=True)
    assert report.outcome == "dry-run" and backend.writes == [] and clock.slept == [] and events == []
    assert report.timeline == [(0.0, 2), (60.0, 5), (120.0, 10)]
    assert report.to_dict()["percent"] == 2


async def test_a_concurrent_write_is_refused_naming_the_last_writer() -> None:
    backend = MemoryBackend()
    await set_percent(backend, 10, old=None, new=None, now=1_700_000_000, actor="bob@laptop")

    def bob_moves_first(b: MemoryBackend) -> None:
        b.version += 1

    backend.before_write = bob_moves_first
    with pytest.raises(StaleStateError) as err:
        await set_percent(backend, 40, old=None, new=None, now=1_700_000_100, actor="alice@ops")
    assert "last cutover write was 10% by bob@laptop at 2023-11-14T22:13:20.000Z" in err.value.message
    assert "Nothing was written" in err.value.message and backend.weights["new"] == 10


@pytest.mark.parametrize("intruder", ["manual", "walk"])
async def test_a_manual_percent_or_another_walk_ends_this_one(intruder: str) -> None:
    backend = MemoryBackend()
    clock = FakeClock()

    async def bob(t: float) -> None:
        if len(clock.slept) != 3:
            return
        if intruder == "manual":
            await set_percent(backend, 30, old=None, new=None, now=t, actor="bob")
        else:
            begin = lambda s: decide.begin(s, PLAN, "", walker="bob/1", now=t, actor="bob")  # noqa: E731
            await change(backend, begin, None, None, dry_run=False)

    clock.on_sleep = bob
    report, _, _ = await run(backend, [GOOD], clock=clock)
    why = "manual at 30% by bob" if intruder == "manual" else "another walk took over (bob/1)"
    assert report.outcome == "stopped" and report.reason == why
    assert [w["new"] for w in backend.writes][:2] == [2, 5] and len(backend.writes) == 3  # bob's write last


async def test_status_flags_weights_edited_by_hand() -> None:
    from infctl.cutover import load, status_dict

    backend = MemoryBackend()
    await set_percent(backend, 40, old=None, new=None, now=1, actor="a")
    backend.weights.update({"old": 1, "new": 1})
    status = status_dict(await load(backend))
    assert status["percent"] == 50 and status["drift"] == "weights edited by hand (cutover last set 40%)"
