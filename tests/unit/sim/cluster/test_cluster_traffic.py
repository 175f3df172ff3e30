"""The simulator's traffic follows infctl bench's load plan: rates, stages, concurrency, conversations."""

from __future__ import annotations

import itertools
import random

from infctl.bench.arrivals import arrival_offsets
from infctl.bench.config import LoadPlan, Stage
from infctl.bench.workloads.base import RequestSpec
from infctl.sim.cluster.traffic import Send, Traffic


def _specs(n: int | None = None, session: int | None = None) -> itertools.chain[RequestSpec]:
    count = itertools.count() if n is None else range(n)
    return itertools.chain(RequestSpec(10, 5, prompt="x", session=session) for _ in count)


def _drain_open(t: Traffic) -> list[Send]:
    out = t.start(0.0)
    while (w := t.wake_at()) is not None:
        out += t.advance(w)
    return out


def test_rate_stage_uses_bench_arrival_offsets() -> None:
    plan = LoadPlan(stages=[Stage(rate=5, num_requests=50)])
    sends = _drain_open(Traffic(_specs(), plan, seed=7))
    expected = list(itertools.islice(arrival_offsets(plan.stages[0], "poisson", 1.0, random.Random(7)), 50))
    assert [s.scheduled_s for s in sends] == expected
    assert [s.index for s in sends] == list(range(50))


def test_timed_stage_hands_its_next_request_to_the_next_stage() -> None:
    plan = LoadPlan(stages=[Stage(rate=10, duration_s=2.0), Stage(rate=1, num_requests=3)])
    sends = _drain_open(Traffic(_specs(), plan))
    first = [s for s in sends if s.stage == 0]
    second = [s for s in sends if s.stage == 1]
    assert all(s.scheduled_s < 2.0 for s in first) and 10 <= len(first) <= 35
    assert len(second) == 3 and second[0].scheduled_s == 2.0


def test_exhausted_workload_ends_the_plan() -> None:
    t = Traffic(_specs(4), LoadPlan(stages=[Stage(rate=100, num_requests=10)]))
    assert len(_drain_open(t)) == 4
    assert t.exhausted and t.done


def test_concurrency_stage_replaces_each_finished_request() -> None:
    t = Traffic(_specs(), LoadPlan(stages=[Stage(concurrency=3, num_requests=7)]))
    in_flight = t.start(0.0)
    assert len(in_flight) == 3
    sent = 3
    now = 0.0
    while in_flight:
        now += 1.0
        done = in_flight.pop(0)
        more = t.finished(done, now)
        sent += len(more)
        in_flight += more
        assert len(in_flight) <= 3
    assert sent == 7 and t.done


def test_a_conversation_turn_waits_for_the_previous_one() -> None:
    t = Traffic(_specs(3, session=1), LoadPlan(stages=[Stage(rate=100, num_requests=3)]))
    sent = _drain_open(t)
    assert len(sent) == 1  # the other two wait behind the first turn
    second = t.finished(sent[0], 5.0)
    assert len(second) == 1 and second[0].scheduled_s == 5.0
    third = t.finished(second[0], 6.0)
    assert len(third) == 1 and third[0].index == 2
