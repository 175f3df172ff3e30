"""The router's admin API as the supervisor uses it: register, drain and remove engines (thin I/O).

Backend ids are the engines' URLs (what the router gives a ``--backend URL`` and an added backend without
an id), ``URL#dpN`` for rank N of a data-parallel engine (``ProcessSpec.backend_ids``). The bearer token
is the one the supervisor gave the router (:mod:`infctl.local.admin_token`); without one,
``INFCTL_ROUTER_ADMIN_TOKEN`` when set, as the router itself reads it.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any
from urllib.parse import quote

import httpx

from infctl.errors import LocalTargetError
from infctl.local.spec import ProcessSpec
from infctl.router.admin_validate import DEFAULT_TOKEN_ENV as TOKEN_ENV


class RouterAdmin:
    """One router's admin API."""

    def __init__(self, client: httpx.AsyncClient, base_url: str, token: str | None = None) -> None:
        self.client, self.base = client, base_url.rstrip("/") + "/admin/backends"
        token = token if token is not None else os.environ.get(TOKEN_ENV)
        self.headers = {"authorization": f"Bearer {token}"} if token else {}

    async def backends(self) -> dict[str, dict[str, Any]]:
        """Backends by id, with ``inflight`` and ``draining``."""
        body = await self._call("GET", self.base)
        return {b["id"]: b for b in body.get("backends", [])}

    async def add(self, spec: ProcessSpec, engine: str | None = None) -> None:
        """Register the engine: one backend, or one per data-parallel rank (``dp_rank`` set)."""
        entry: dict[str, Any] = {"url": spec.url, "role": spec.role or "both"}
        entry.update({k: v for k, v in (("group", spec.group), ("pool", spec.pool), ("engine", engine)) if v})
        if spec.kv_events is not None:
            # The router subscribes to it, so the precise prefix index covers engines added at run time;
            # a rank's entry names the engine's base endpoint, as in the router file.
            entry["kv_events"] = spec.kv_events
        if "bootstrap" in spec.ports:
            entry["bootstrap_port"] = spec.ports["bootstrap"]  # where its decodes meet it (SGLang PD)
        for bid, rank in zip(spec.backend_ids, spec.dp_ranks, strict=True):
            body = entry if rank is None else {**entry, "dp_rank": rank}
            # PUT: registers it, or brings the router's definition up to date if it already has one.
            await self._call("PUT", self._url(bid), json=body)

    async def drain(self, backend_id: str) -> None:
        await self._call("POST", self._url(backend_id) + "/drain", json={"draining": True})

    async def remove(self, backend_id: str) -> None:
        await self._call("DELETE", self._url(backend_id), missing_ok=True)

    def _url(self, backend_id: str) -> str:
        # A rank's id ends in ``#dpN``: unescaped, ``#`` would start the URL's fragment.
        return f"{self.base}/{quote(backend_id, safe=':/')}"

    async def wait_idle(self, backend_id: str, within: float, interval: float = 0.1) -> bool:
        """Poll until the router has no request in flight on ``backend_id``; False after ``within`` s."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while True:
            listed = (await self.backends()).get(backend_id)
            if listed is None or not listed.get("inflight"):
                return True
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(interval)

    async def _call(self, method: str, url: str, *, json: Any = None, missing_ok: bool = False) -> Any:
        # The router takes writes as JSON only (a DELETE too), the guard against cross-site form posts.
        headers = self.headers if method == "GET" else {**self.headers, "content-type": "application/json"}
        try:
            resp = await self.client.request(method, url, json=json, headers=headers)
        except httpx.HTTPError as err:
            raise LocalTargetError(
                f"{method} {url}: {type(err).__name__}: {err}",
                hint="is the router running? see `infctl status`",
            ) from None
        if resp.status_code == 404 and missing_ok:
            return {}
        if resp.status_code >= 400:
            raise LocalTargetError(
                f"{method} {url} answered {resp.status_code}: {resp.text[:200]}",
                hint=f"set {TOKEN_ENV} when the router requires a token",
            )
        return resp.json()
