import asyncio

import pytest

from infctl.router.admission import AdmissionQueue, Deadline, QueueFull, saturated
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
