"""The local actuator: the supervisor's control endpoint (``GET /scale``, ``PUT /scale/{unit}``).

The supervisor does the careful part itself (start, health, router registration; drain, wait for
in-flight requests, removal, stop), as a Kubernetes controller would behind ``/scale``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from infctl.autoscaler.fleet import Fleet, ReplicaInfo
from infctl.autoscaler.snapshot import UnitStatus
from infctl.errors import LocalTargetError


class LocalActuator:
    def __init__(self, client: httpx.AsyncClient, control_url: str) -> None:
        self.client, self.url = client, control_url.rstrip("/")

    async def observe(self) -> Fleet:
        body = await self._call("GET", "/scale")
        units = {u: UnitStatus(desired=s["desired"], ready=s["ready"]) for u, s in body["units"].items()}
        replicas = tuple(
            ReplicaInfo(
                r["name"], r["url"], r["role"] or "both", r.get("group"), bool(r["ready"]), r.get("pool")
            )
            for s in body["units"].values()
            for r in s["replicas"]
        )
        return Fleet(units=units, replicas=replicas, router_url=body.get("router"))

    async def scale(self, unit: str, replicas: int) -> None:
        await self._call("PUT", f"/scale/{unit}", json={"replicas": replicas})

    async def _call(self, method: str, path: str, json: Any = None) -> Any:
        try:
            resp = await self.client.request(method, self.url + path, json=json)
        except httpx.HTTPError as err:
            raise LocalTargetError(
                f"{method} {self.url}{path}: {type(err).__name__}",
                hint="is the local release running? `infctl status` shows it",
            ) from None
        if resp.status_code >= 400:
            detail = resp.text[:200]
            raise LocalTargetError(f"{method} {self.url}{path} answered {resp.status_code}: {detail}")
        return resp.json()


def control_url(run_dir: Path, release: str) -> str:
    """The control endpoint of a running local release, from its state file."""
    from infctl.local import read_state

    state = read_state(run_dir, release)
    deploy = (
        "infctl deploy --target local -f PROFILE --detach --set autoscaler.enabled=true "
        "--set autoscaler.both.min=1 --set autoscaler.both.max=4 (PD: prefill and decode in place of both)"
    )
    if state is None:
        raise LocalTargetError(
            f"no local release {release!r} in {run_dir}",
            hint=f"deploy it with its autoscaler on: {deploy}",
        )
    if state.status != "running":
        raise LocalTargetError(
            f"local release {release!r} in {run_dir} is {state.status}, not running",
            hint=f"`infctl status {release}` says why; deploy it again",
        )
    if state.control_url is None:  # a local profile's autoscaler is off unless the profile turns it on
        raise LocalTargetError(
            f"local release {release!r} runs without runtime scaling (deployed with its autoscaler off)",
            hint=f"infctl delete {release}, then {deploy}",
        )
    return state.control_url
