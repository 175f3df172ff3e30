"""The supervisor's control endpoint on 127.0.0.1 (its URL is ``control_url`` in state.json).

Routes (JSON)::

    GET /health              200 while the supervisor runs
    GET /scale               per unit: desired, ready, starting, stopping, max, and the active replicas
    PUT /scale/{unit}        {"replicas": N}: converge on N units (202); 400 when out of 0..max
    POST /restart/{name}     restart the router ``name`` without refusing a connection (its successor
                             starts beside it on the same port, then it hands over): 200 once done

This is how ``infctl autoscaler`` (a separate process) scales a local release, as it would use the
``/scale`` subresource of a Kubernetes workload. It listens on the loopback interface only.
"""

from __future__ import annotations

import asyncio
import functools
from typing import TYPE_CHECKING

from aiohttp import web

from infctl.errors import LocalTargetError
from infctl.local.runtime import Scaler
from infctl.local.spec import LOCALHOST

if TYPE_CHECKING:
    from infctl.local.supervisor import _Supervisor


class Control:
    """The runtime scaler and its HTTP endpoint."""

    def __init__(self, scaler: Scaler, runner: web.AppRunner, task: asyncio.Task[None], url: str) -> None:
        self.scaler, self.runner, self.task, self.url = scaler, runner, task, url

    @classmethod
    async def start(cls, sup: _Supervisor, port: int) -> Control:
        scaler = Scaler(sup)
        app = web.Application()
        app.router.add_get("/health", _health)
        app.router.add_get("/scale", functools.partial(_status, scaler))
        app.router.add_put("/scale/{unit}", functools.partial(_scale, scaler))
        app.router.add_post("/restart/{name}", functools.partial(_restart, sup))
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        try:
            await web.TCPSite(runner, LOCALHOST, port).start()
        except OSError as err:
            await runner.cleanup()
            raise LocalTargetError(
                f"the supervisor's control endpoint cannot listen on {LOCALHOST}:{port}: {err.strerror}",
                hint="another program took the port; deploy again to plan a free one",
            ) from None
        return cls(scaler, runner, asyncio.create_task(scaler.run()), f"http://{LOCALHOST}:{port}")

    async def close(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        await self.scaler.close()
        await self.runner.cleanup()


async def _health(_: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def _status(scaler: Scaler, _: web.Request) -> web.Response:
    return web.json_response(scaler.status())


async def _scale(scaler: Scaler, request: web.Request) -> web.Response:
    try:
        body = await request.json()
    except ValueError:
        body = None
    replicas = body.get("replicas") if isinstance(body, dict) else None
    if not isinstance(replicas, int) or isinstance(replicas, bool):
        return _error(400, 'expected a JSON body {"replicas": N}')
    unit = request.match_info["unit"]
    try:
        scaler.scale(unit, replicas)
    except LocalTargetError as err:
        return _error(400 if unit in scaler.slots else 404, err.message)
    return web.json_response({"unit": unit, "desired": replicas}, status=202)


async def _restart(sup: _Supervisor, request: web.Request) -> web.Response:
    name = request.match_info["name"]
    child = next((c for c in sup.children if c.spec.name == name), None)
    if child is None or child.spec.kind != "router":
        return _error(404, f"no router named {name!r} in this release (only routers hand over)")
    try:
        await sup.hand_over(child)
    except LocalTargetError as err:
        return _error(503, err.message)
    return web.json_response({"name": name, "pid": child.proc.pid if child.proc else None})


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": {"message": message, "code": status}}, status=status)
