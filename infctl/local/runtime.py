"""Runtime scaling of a local release: start engines from the reserve, drain and stop them (async I/O).

The supervisor's :class:`Scaler` holds a desired count per unit (``scale(unit, n)``, also reachable over
the control endpoint) and converges on it, slot by slot (see :mod:`infctl.local.scaling`):

- out: start the slot's engines, wait until they are healthy, register them with the router;
- in: stop routing to them (router drain), wait until the router has nothing in flight on them (at most
  ``drain_timeout``) so no stream is cut, remove them from the router, then stop them.

A data-parallel engine is one router backend per rank (``ProcessSpec.backend_ids``): every step above
covers all of its ranks, and the engine stops only once none of them has a request in flight.

It also keeps the router's backends equal to the ready engines (a restarted router comes back with the
deployed list only).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from infctl.errors import InfctlError, LocalTargetError
from infctl.local.admin_token import router_token
from infctl.local.launch import terminate
from infctl.local.router_admin import RouterAdmin
from infctl.local.scaling import Slot, deployed, moves, plan_slots

if TYPE_CHECKING:
    from infctl.local.supervisor import _Supervisor

log = logging.getLogger(__name__)


class Scaler:
    def __init__(self, sup: _Supervisor) -> None:
        self.sup = sup
        self.slots = plan_slots(sup.plan)
        start = deployed(sup.plan)
        self.desired = {u: sum(s.name in start for s in slots) for u, slots in self.slots.items()}
        self.active, self.ready, self.stopping = set(start), set(start), set[str]()
        self.ops: dict[str, asyncio.Task[None]] = {}
        self.wake = asyncio.Event()
        router = next((s for s in sup.plan.specs if s.kind == "router"), None)
        self.router_name = router.name if router is not None else None
        token = router_token(sup.plan)
        self.router = RouterAdmin(sup.client, router.url, token) if router is not None else None

    def scale(self, unit: str, replicas: int) -> None:
        """Ask for ``replicas`` units of ``unit``; the loop converges on it."""
        if unit not in self.slots:
            raise LocalTargetError(f"no unit {unit!r}; this release scales {', '.join(sorted(self.slots))}")
        most = len(self.slots[unit])
        if not 0 <= replicas <= most:
            raise LocalTargetError(
                f"{unit}: {replicas} is out of 0..{most}",
                hint="the plan reserves engines up to the autoscaler's max: raise it and deploy again",
            )
        self.desired[unit] = replicas
        self.wake.set()

    def is_ready(self, slot: Slot) -> bool:
        """Registered and every member healthy right now (a crashed engine is not capacity)."""
        healthy = {p.name for p in self.sup.state.processes if p.status == "healthy"}
        return slot.name in self.ready and all(m.name in healthy for m in slot.members)

    def status(self) -> dict[str, Any]:
        router = next((s.url for s in self.sup.plan.specs if s.kind == "router"), None)
        return {
            "release": self.sup.plan.release,
            "router": router,
            "units": {
                unit: {
                    "desired": self.desired[unit],
                    "ready": sum(self.is_ready(s) for s in slots),
                    "starting": sum(s.name in self.active and not self.is_ready(s) for s in slots),
                    "stopping": sum(s.name in self.stopping for s in slots),
                    "max": len(slots),
                    "replicas": [
                        {
                            "name": m.name,
                            "url": m.url,
                            "role": m.role,
                            "group": m.group,
                            "pool": m.pool,
                            "ready": self.is_ready(s),
                            "backends": list(m.backend_ids),
                        }
                        for s in slots
                        if s.name in self.active
                        for m in s.members
                    ],
                }
                for unit, slots in self.slots.items()
            },
        }

    async def run(self) -> None:
        """Converge until the supervisor halts."""
        while not self.sup.halt.is_set():
            self.wake.clear()
            self.reconcile()
            try:
                await self.sync_router()
            except InfctlError as err:
                log.warning("router sync: %s", err.message)
            waiter = asyncio.ensure_future(self.wake.wait())
            try:
                await asyncio.wait({waiter}, timeout=self.sup.settings.reconcile_interval)
            finally:  # also when cancelled (``Control.close``): a waiter left pending is destroyed with it
                waiter.cancel()

    def reconcile(self) -> None:
        for unit, slots in self.slots.items():
            start, stop = moves(slots, self.active, self.stopping, self.desired[unit])
            for slot in start:
                self.active.add(slot.name)
                self.ops[slot.name] = asyncio.create_task(self.bring_up(slot))
            for slot in stop:
                self.active.discard(slot.name)
                self.stopping.add(slot.name)
                self.ops[slot.name] = asyncio.create_task(self.take_down(slot, self.ops.get(slot.name)))

    async def bring_up(self, slot: Slot) -> None:
        children = [self.sup.add_child(spec) for spec in slot.members]
        for child in children:
            await self.sup.launch(child)
            self.sup.watch(child)
        for child, reason in zip(
            children, await asyncio.gather(*map(self.sup.wait_healthy, children)), strict=True
        ):
            if reason is not None and not self.sup.over(child) and child.proc is not None:
                # Its watcher restarts it with backoff, and waits for its health again.
                log.warning("%s %s; restarting it", child.spec.name, reason)
                await terminate(child.proc, self.sup.settings.grace_period)
        names = [c.spec.name for c in children]
        while not all(self.sup.state.process(n).status == "healthy" for n in names):
            if self.sup.halt.is_set() or any(c.retired.is_set() for c in children):
                return
            await self.sup.sleep(self.sup.settings.health_interval)
        if self.router is not None and slot.name in self.active:
            for spec in slot.members:
                await self.router.add(spec)
        self.ready.add(slot.name)
        log.info("scaled out: %s ready", slot.name)

    async def take_down(self, slot: Slot, starting: asyncio.Task[None] | None) -> None:
        children = [self.sup.child(spec.name) for spec in slot.members]
        if starting is not None and not starting.done():
            for child in children:
                child.retired.set()
            await asyncio.gather(starting, return_exceptions=True)
        self.ready.discard(slot.name)
        if self.router is not None:
            await self._drain(slot)
        await asyncio.gather(*(self.sup.retire(c) for c in children))
        self.stopping.discard(slot.name)
        log.info("scaled in: %s stopped", slot.name)

    async def _drain(self, slot: Slot) -> None:
        assert self.router is not None
        ids = [bid for spec in slot.members for bid in spec.backend_ids]  # every rank of every engine
        try:
            for bid in ids:
                await self.router.drain(bid)
            timeout = self.sup.settings.drain_timeout
            idle = await asyncio.gather(*(self.router.wait_idle(bid, timeout) for bid in ids))
            if not all(idle):
                log.warning("%s still had requests in flight after %.0f s; stopping it", slot.name, timeout)
            for bid in ids:
                await self.router.remove(bid)
        except InfctlError as err:
            # An unknown backend (never registered) or a router that is down: nothing to drain.
            log.info("drain %s: %s", slot.name, err.message)

    async def sync_router(self) -> None:
        """Register ready engines the router lacks; remove engines it routes to that no longer run."""
        if self.router is None or self.router_name is None:
            return
        if self.sup.state.process(self.router_name).status != "healthy":
            return
        listed = await self.router.backends()
        for unit_slots in self.slots.values():
            for slot in unit_slots:
                for spec in slot.members:
                    ids = spec.backend_ids
                    if slot.name in self.ready and not all(bid in listed for bid in ids):
                        await self.router.add(spec)  # every rank: PUT keeps a listed one's drain and counts
                    elif slot.name not in self.active | self.stopping:
                        for bid in (bid for bid in ids if bid in listed):
                            await self.router.remove(bid)

    async def close(self) -> None:
        for op in self.ops.values():
            op.cancel()
        await asyncio.gather(*self.ops.values(), return_exceptions=True)
