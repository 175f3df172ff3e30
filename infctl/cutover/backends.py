"""Traffic backends: where the split lives and how it is changed, with optimistic concurrency.

- :class:`RouterBackend`: the infctl router's weighted upstream groups (``/admin/upstreams``, ``If-Match``);
- :class:`~infctl.cutover.httproute.HTTPRouteBackend`: a Gateway API HTTPRoute's backendRef weights
  (``metadata.resourceVersion``), state in its annotations.

``write`` is refused with :class:`StaleStateError` when the object changed since ``read``; the error names the
last writer. It is never retried: the caller's decision was made on what it read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

import httpx

from infctl.config.router import ADMIN_TOKEN_ENV as ADMIN_TOKEN_ENV
from infctl.cutover.errors import CutoverError, StaleStateError
from infctl.cutover.state import from_annotations, iso


class Observed(NamedTuple):
    """One read of the traffic object."""

    weights: dict[str, float]
    annotations: dict[str, str]
    version: str
    targets: tuple[str, ...] = ()
    """Names a split may use: upstream groups with backends (router), backendRef names (HTTPRoute)."""
    split_set: bool = True
    """False when no weights are set and ``weights`` are what the router applies meanwhile (its groups'
    capacity): the split is real but nobody chose it."""


class TrafficBackend(Protocol):
    @property
    def where(self) -> str:
        """The object, for messages: ``router http://...`` or ``HTTPRoute ns/name``."""

    async def read(self) -> Observed: ...

    async def write(
        self, weights: Mapping[str, int], annotations: Mapping[str, str], expected_version: str
    ) -> Observed:
        """Set ``weights`` (other groups untouched) and the full ``annotations``; StaleStateError when
        the object is no longer at ``expected_version``."""


def stale_error(where: str, read_version: str, now: Observed, last_change: str = "") -> StaleStateError:
    state = from_annotations(now.annotations, where)
    who = (f"the last cutover write was {state.percent}% by {state.actor} at {iso(state.updated)}"
           if state.actor and state.updated is not None else "it carries no cutover state")  # fmt: skip
    extra = f"; {last_change}" if last_change else ""
    return StaleStateError(
        f"{where} changed since it was read (version {read_version}, now {now.version}): {who}{extra}. "
        "Nothing was written.",
        hint="see `infctl cutover status` for who moved it, then re-run if your change still makes sense",
    )


@dataclass
class RouterBackend:
    """The router's admin API; ``client`` comes from :func:`infctl.telemetry.scrape.make_client`."""

    client: httpx.AsyncClient
    url: str
    token: str | None = None
    _view: dict[str, Any] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"router {self.url}"

    async def read(self) -> Observed:
        self._view = await self._call("GET", "/admin/upstreams")
        backends = (await self._call("GET", "/admin/backends")).get("backends", [])
        groups = sorted({str(b.get("upstream", "default")) for b in backends})
        return _observed(self._view, tuple(groups))

    async def write(
        self, weights: Mapping[str, int], annotations: Mapping[str, str], expected_version: str
    ) -> Observed:
        body: dict[str, Any] = {"weights": {**self._view.get("weights", {}), **weights},
                                "annotations": dict(annotations)}  # fmt: skip
        if self._view.get("mirror"):
            body["mirror"] = self._view["mirror"]
        try:
            self._view = await self._call("PUT", "/admin/upstreams", body, {"if-match": expected_version})
        except _Stale:
            raise stale_error(self.where, expected_version, await self.read()) from None
        return _observed(self._view, ())

    async def _call(
        self, method: str, path: str, body: Any = None, headers: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        url = self.url.rstrip("/") + path
        auth = {"authorization": f"Bearer {self.token}"} if self.token else {}
        try:
            resp = await self.client.request(method, url, json=body, headers={**auth, **(headers or {})})
        except httpx.HTTPError as err:
            hint = "check --router URL and that the router is running"
            raise CutoverError(f"{method} {url}: {type(err).__name__}: {err}", hint=hint) from None
        if resp.status_code == 412:
            raise _Stale
        if resp.status_code == 401:
            raise CutoverError(f"{method} {url}: 401: the admin token was refused",
                               hint=f"set {ADMIN_TOKEN_ENV} to the router's admin token")  # fmt: skip
        if resp.status_code >= 400:
            raise CutoverError(f"{method} {url}: {resp.status_code}: {resp.text[:200]}",
                               hint="is this an infctl router with weighted upstreams?")  # fmt: skip
        data = resp.json()
        return data if isinstance(data, dict) else {}


class _Stale(Exception):
    pass


def _observed(view: Mapping[str, Any], targets: tuple[str, ...]) -> Observed:
    """The split the router applies (``applied``), which is the one set when weights are set; a router
    that does not report ``applied`` is read by its set weights."""
    applied, set_ = view.get("applied"), view.get("weights") or {}
    raw = set_ if applied is None else applied
    weights = {str(k): float(v) for k, v in raw.items()}
    annotations = {str(k): str(v) for k, v in (view.get("annotations") or {}).items()}
    split_set = bool(set_) or applied is None
    return Observed(weights, annotations, str(view.get("version", 0)), targets, split_set)
