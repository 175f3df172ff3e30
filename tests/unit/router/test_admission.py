import asyncio
from typing import ClassVar

import pytest

from infctl.router.admission import (
    Admission,
    AdmissionQueue,
    Deadline,
    QueueFull,
    Scope,
    classify,
    empty,
    headroom,
    priority,
    retry_after_s,
    saturated,
    scope_of,
)
from infctl.router.policies.buckets import Bucket, BucketConfig, parse_buckets
from infctl.router.settings import PolicySettings
from infctl.router.snapshot import Backend, BackendState, Snapshot
from infctl.telemetry.signals import EngineSignals

S = PolicySettings(stale_after_s=0.2, saturation_queue=5, saturation_kv=0.8)


def snap(*loads: tuple[float, float, float]) -> Snapshot:
    """(queue, kv_usage, age) per backend."""
    backends = tuple(Backend(id=f"b{i}") for i in range(len(loads)))
    states = {
        f"b{i}": BackendState(signals=EngineSignals(queue=q, kv_usage=kv), signals_age_s=age)
        for i, (q, kv, age) in enumerate(loads)
    }
    return Snapshot(backends=backends, states=states)


def test_saturated_only_when_every_fresh_backend_is_full() -> None:
    assert saturated(snap((5, 0, 0), (0, 0.85, 0)), S)
    assert not saturated(snap((5, 0, 0), (4, 0.5, 0)), S)
    # Stale signals are no evidence of a full queue: they neither hold nor release alone.
    assert not saturated(snap((9, 0, 5.0)), S)
    assert saturated(snap((9, 0, 0), (0, 0, 5.0)), S)


async def test_waiters_released_short_first_then_fifo() -> None:
    full = True
    q = AdmissionQueue(10, 5.0, lambda: full)
    order: list[str] = []

    async def req(name: str, prio: int) -> None:
        await q.admit(prio, saturated_now=True)
        order.append(name)

    tasks = [
        asyncio.create_task(req(n, p)) for n, p in [("long1", 1), ("short1", 0), ("long2", 1), ("short2", 0)]
    ]
    await asyncio.sleep(0.01)
    assert q.waiting == 4 and order == []
    full = False
    for _ in range(4):
        q.wake()
        await asyncio.sleep(0)
    await asyncio.gather(*tasks)
    assert order == ["short1", "short2", "long1", "long2"]


async def test_full_queue_and_deadline_reject() -> None:
    q = AdmissionQueue(1, 0.05, lambda: True)
    waiter = asyncio.create_task(q.admit(0, saturated_now=True))
    await asyncio.sleep(0.01)
    with pytest.raises(QueueFull):
        await q.admit(0, saturated_now=True)
    with pytest.raises(Deadline):
        await waiter
    assert q.waiting == 0 and q.rejected_full == 1 and q.rejected_deadline == 1


async def test_no_wait_when_capacity_and_nobody_queued() -> None:
    q = AdmissionQueue(1, 0.05, lambda: True)
    await asyncio.wait_for(q.admit(1, saturated_now=False), 0.01)
    off = AdmissionQueue(0, 0.05, lambda: True)
    await asyncio.wait_for(off.admit(1, saturated_now=True), 0.01)


BUCKETS = parse_buckets(
    [
        {"name": "short", "max_tokens": 512, "pools": ["short"]},
        {"name": "long", "pools": ["long"]},
    ]
)


def pooled(*loads: tuple[str, float]) -> Snapshot:
    """(pool, queue) per backend, all fresh."""
    backends = tuple(Backend(id=f"b{i}", pool=p) for i, (p, _) in enumerate(loads))
    states = {
        f"b{i}": BackendState(signals=EngineSignals(queue=q), signals_age_s=0)
        for i, (_, q) in enumerate(loads)
    }
    return Snapshot(backends=backends, states=states)


def test_priority_is_the_bucket_rank_with_buckets_else_the_short_threshold() -> None:
    assert [priority(BUCKETS, n, 2048) for n in (10, 512, 513, 4000)] == [0, 0, 1, 1]
    assert [priority(None, n, 2048) for n in (512, 2048, 2049)] == [0, 0, 1]


class CountingBuckets(BucketConfig):
    """The same buckets, counting prompt lookups."""

    lookups: ClassVar[list[int]] = []

    def classify(self, prompt_tokens: int) -> tuple[int, Bucket]:
        self.lookups.append(prompt_tokens)
        return super().classify(prompt_tokens)


def test_classify_is_priority_and_scope_from_one_bucket_lookup() -> None:
    counting = CountingBuckets(BUCKETS.buckets)
    for n in (0, 10, 512, 513, 4000, 10**6):
        CountingBuckets.lookups.clear()
        assert classify(counting, n, 2048) == Admission(priority(BUCKETS, n, 2048), scope_of(BUCKETS, n))
        assert CountingBuckets.lookups == [n]  # priority() and scope_of() take one each
    for n in (512, 2048, 2049):
        assert classify(None, n, 2048) == Admission(priority(None, n, 2048), None)


def test_a_request_waits_only_for_its_own_pools_and_their_spill() -> None:
    short, long = scope_of(BUCKETS, 100), scope_of(BUCKETS, 5000)
    assert short == Scope(frozenset({"short"}), frozenset({"long"})) and long == Scope(frozenset({"long"}))
    assert scope_of(None, 100) is None
    long_full = pooled(("short", 0), ("long", 9))
    assert not saturated(long_full, S, short) and saturated(long_full, S, long)
    assert not saturated(long_full, S)  # across every backend, someone has room
    short_full = pooled(("short", 9), ("long", 0))
    assert not saturated(short_full, S, short)  # a short request may spill into the long pool
    assert not saturated(short_full, S, long)
    assert saturated(pooled(("short", 9), ("long", 9)), S, short)
    # Its pools have no backend: bucketing sends it anywhere, so any backend with room admits it.
    assert not saturated(pooled(("other", 0), ("long", 9)), S, short)


async def test_a_full_pool_holds_only_its_own_requests() -> None:
    full = {Scope(frozenset({"long"})): True, Scope(frozenset({"short"}), frozenset({"long"})): True}
    q = AdmissionQueue(10, 5.0, lambda: True, scope_saturated=lambda s: full[s])
    long, short = Scope(frozenset({"long"})), Scope(frozenset({"short"}), frozenset({"long"}))
    order: list[str] = []

    async def req(name: str, prio: int, scope: Scope, now: bool) -> None:
        await q.admit(prio, saturated_now=now, scope=scope)
        order.append(name)

    waiting = [
        asyncio.create_task(req("long", 0, long, True)),
        asyncio.create_task(req("short", 0, short, True)),
    ]
    await asyncio.sleep(0.01)
    assert q.waiting == 2
    # The long pool is still full: the short waiter leaves first although it queued later ...
    full[short] = False
    q.wake()
    await asyncio.sleep(0.01)
    assert order == ["short"]
    # ... and a new request in a scope with room and nobody waiting is not held behind the long one.
    await asyncio.wait_for(req("short2", 0, short, False), 0.1)
    q.wake()
    await asyncio.sleep(0.01)
    assert order == ["short", "short2"] and q.waiting == 1
    full[long] = False
    q.wake()
    await asyncio.gather(*waiting)
    assert order == ["short", "short2", "long"]


def test_retry_after_follows_the_drain_rate_within_the_deadline() -> None:
    assert retry_after_s(waiting=9, drain_per_s=5.0, deadline_s=30) == 2
    assert retry_after_s(waiting=0, drain_per_s=100.0, deadline_s=30) == 1
    assert retry_after_s(waiting=1000, drain_per_s=1.0, deadline_s=30) == 30
    assert retry_after_s(waiting=3, drain_per_s=0.0, deadline_s=7.5) == 8  # nothing drains: the deadline


async def test_the_queue_measures_its_drain_rate() -> None:
    now = [100.0]
    q = AdmissionQueue(100, 60.0, lambda: False, clock=lambda: now[0])
    assert q.retry_after_s() == 60  # nothing released yet
    for _ in range(3):
        task = asyncio.create_task(q.admit(0, saturated_now=True))
        await asyncio.sleep(0)
        q.wake()
        await task
        now[0] += 1.0
    # 3 releases in the 10 s window: 0.3/s; nobody waits, so the next one in ceil(1/0.3) s.
    assert q.retry_after_s() == 4
    now[0] += 20
    assert q.retry_after_s() == 60  # old releases say nothing about the queue now


def test_headroom_counts_free_queue_places_of_fresh_unsaturated_backends() -> None:
    assert headroom(snap((5, 0, 0), (0, 0.85, 0)), S) == 0  # saturated: nothing to release
    assert headroom(snap((0, 0, 0), (3, 0.5, 0), (5, 0, 0)), S) == 5 + 2
    assert headroom(snap((4.5, 0, 0)), S) == 1  # room below the threshold counts as one place
    assert headroom(snap((0, 0, 5.0)), S) == 1  # stale only: one at a time
    for loads in [((5, 0, 0), (0, 0.85, 0)), ((0, 0, 0),), ((9, 0, 5.0),)]:
        assert (headroom(snap(*loads), S) == 0) == saturated(snap(*loads), S)


async def test_one_wake_releases_as_many_waiters_as_the_scope_has_room_for() -> None:
    room: dict[Scope | None, int] = {None: 0}
    q = AdmissionQueue(300, 5.0, lambda: room[None] == 0, room=lambda s: room[s])
    tasks = [asyncio.create_task(q.admit(0, saturated_now=True)) for _ in range(200)]
    await asyncio.sleep(0.01)
    assert q.waiting == 200
    q.wake()  # still saturated: nobody leaves
    await asyncio.sleep(0.01)
    assert q.waiting == 200 and not any(t.done() for t in tasks)
    room[None] = 150
    q.wake()  # room for 150: all 150 leave on this one wake, and no more
    await asyncio.sleep(0.01)
    assert q.waiting == 50 and sum(t.done() for t in tasks) == 150
    room[None] = 1000
    q.wake()
    assert all(await asyncio.gather(*tasks)) and q.waiting == 0


async def test_the_router_state_wakes_by_its_pools_headroom() -> None:
    """The wiring: the router's queue asks the pool's last scrape how many waiters one wake may release."""
    from infctl.router.config import RouterConfig
    from infctl.router.server import build_state

    cfg = RouterConfig(backends=(Backend(id="a", url="http://127.0.0.1:9"),), admission_queue=50)
    state = build_state(cfg, upstream_client="aiohttp")
    try:
        loop = asyncio.get_running_loop()
        state.pool.record_signals("a", EngineSignals(queue=9.0), loop.time())  # saturated (queue >= 5)
        waiters = [asyncio.create_task(state.admission.admit(1, saturated_now=True)) for _ in range(6)]
        await asyncio.sleep(0)
        state.pool.record_signals("a", EngineSignals(queue=1.0), loop.time())  # room for 4 below 5
        state.admission.wake()
        for _ in range(3):  # a released waiter's task finishes a loop turn or two later
            await asyncio.sleep(0)
        assert sum(w.done() for w in waiters) == 4
        state.admission.wake()
        await asyncio.gather(*waiters)
    finally:
        await state.session.close()


def test_empty_is_no_routable_backend_in_the_scopes_own_pools_or_at_all() -> None:
    short, long = scope_of(BUCKETS, 100), scope_of(BUCKETS, 5000)
    only_long = pooled(("long", 9))
    assert short is not None and long is not None
    assert empty(only_long, short) and not empty(only_long, long) and not empty(only_long)
    assert empty(Snapshot(backends=(), states={}))
    ejected = Snapshot(backends=(Backend(id="b0", pool="short", ejected=True),), states={})
    assert empty(ejected, short) and empty(ejected)


async def test_waiters_of_an_empty_scope_stay_until_a_backend_appears_and_count_per_pool() -> None:
    short = Scope(frozenset({"short", "tiny"}))
    backends: set[str] = set()
    q = AdmissionQueue(10, 30.0, lambda: False, room=lambda s: 1, is_empty=lambda s: "short" not in backends)
    held = asyncio.create_task(q.admit(0, saturated_now=True, scope=short, hold_s=30.0))
    await asyncio.sleep(0.01)
    q.wake()  # room says 1, but the scope has no backend: nobody leaves
    await asyncio.sleep(0.01)
    assert not held.done() and q.waiting_by_pool() == {"short": 1, "tiny": 1}
    backends.add("short")
    q.wake()
    assert await asyncio.wait_for(held, 1.0) is True and q.waiting_by_pool() == {}
    with pytest.raises(Deadline):  # its own deadline (hold_s), not the queue's 30 s
        await q.admit(0, saturated_now=True, scope=Scope(frozenset({"none"})), hold_s=0.05)
