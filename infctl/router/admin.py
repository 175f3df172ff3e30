"""The admin API (bearer token): list, add, drain and remove backends; read and change the policy and weights.

Routes::

    GET    /admin/backends                 backends with health, load and counters
    POST   /admin/backends                 {"url": ..., "role": ..., "group": ..., "pool": ...}
    DELETE /admin/backends/{id}            remove now (in-flight requests finish)
    POST   /admin/backends/{id}/drain      stop sending new requests; {"draining": false} undoes it
    PUT    /admin/backends/{id}/weight     {"weight": 2.0}
    GET    /admin/policy                   the active policy config
    PUT    /admin/policy                   a preset name or policy dict; prefix indexes are kept
    GET    /admin/upstreams                weighted upstream groups, mirror, annotations, version
    PUT    /admin/upstreams                {"weights": {"old": 60, "new": 40}, "mirror": .., ...}
                                           with If-Match: <version> for optimistic concurrency (412 if stale)
"""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from aiohttp import web

from infctl.errors import ConfigError
from infctl.router.kv_events import KVSource
from infctl.router.policies import build_policy
from infctl.router.policies.weights import parse_upstreams
from infctl.router.snapshot import Backend

if TYPE_CHECKING:
    from infctl.router.server import RouterState

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_BACKEND_FIELDS = {"url", "id", "role", "group", "pool", "upstream", "engine", "dp_rank", "weight", "models"}
_EXTRA_FIELDS = {"kv_events"}


def add_routes(app: web.Application, state: RouterState) -> None:
    def guarded(fn: Callable[[RouterState, web.Request], Awaitable[web.StreamResponse]]) -> Handler:
        async def handler(request: web.Request) -> web.StreamResponse:
            token = state.cfg.admin_token
            if token is not None:
                given = request.headers.get("authorization", "")
                if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                    return _error(401, "missing or wrong bearer token")
            try:
                return await fn(state, request)
            except ConfigError as exc:
                return _error(400, exc.message)
            except KeyError as exc:
                return _error(404, str(exc.args[0]) if exc.args else "not found")

        return handler

    app.router.add_get("/admin/backends", guarded(_list))
    app.router.add_post("/admin/backends", guarded(_add))
    app.router.add_delete("/admin/backends/{id:.+}", guarded(_remove))
    app.router.add_post("/admin/backends/{id:.+}/drain", guarded(_drain))
    app.router.add_put("/admin/backends/{id:.+}/weight", guarded(_weight))
    app.router.add_get("/admin/policy", guarded(_get_policy))
    app.router.add_put("/admin/policy", guarded(_set_policy))
    app.router.add_get("/admin/upstreams", guarded(_get_upstreams))
    app.router.add_put("/admin/upstreams", guarded(_set_upstreams))


def backend_from_json(body: Any) -> Backend:
    if not isinstance(body, dict) or not isinstance(body.get("url"), str):
        raise ConfigError("a backend needs at least a 'url' string")
    unknown = set(body) - _BACKEND_FIELDS - _EXTRA_FIELDS
    if unknown:
        raise ConfigError(f"unknown backend fields: {', '.join(sorted(unknown))}")
    fields = {k: v for k, v in body.items() if k in _BACKEND_FIELDS}
    fields["url"] = fields["url"].rstrip("/")
    fields.setdefault("id", fields["url"])
    if "models" in fields:
        fields["models"] = tuple(fields["models"])
    try:
        return Backend(**fields)
    except TypeError as exc:
        raise ConfigError(f"bad backend: {exc}") from None


async def _list(state: RouterState, request: web.Request) -> web.Response:
    return web.json_response({"backends": state.pool.describe(asyncio.get_running_loop().time())})


async def _add(state: RouterState, request: web.Request) -> web.Response:
    body = await _json(request)
    backend = backend_from_json(body)
    kv = body.get("kv_events")
    if kv is not None and not isinstance(kv, str):
        raise ConfigError("'kv_events' must be a ZMQ endpoint such as tcp://10.0.0.7:5557")
    state.pool.add(backend)
    state.scrape_soon(backend.id)
    if kv:
        state.follow_kv_events(KVSource(endpoint=kv, backends={backend.dp_rank: backend.id}))
    return web.json_response({"added": backend.id}, status=201)


async def _remove(state: RouterState, request: web.Request) -> web.Response:
    bid = request.match_info["id"]
    if state.pool.remove(bid) is None:
        raise KeyError(f"unknown backend {bid!r}")
    state.core.forget(bid)
    return web.json_response({"removed": bid})


async def _drain(state: RouterState, request: web.Request) -> web.Response:
    bid = request.match_info["id"]
    body = await _json(request, default={})
    draining = bool(body.get("draining", True)) if isinstance(body, dict) else True
    state.pool.set_draining(bid, draining)
    return web.json_response({"id": bid, "draining": draining, "inflight": state.pool.inflight(bid)})


async def _weight(state: RouterState, request: web.Request) -> web.Response:
    bid = request.match_info["id"]
    body = await _json(request)
    weight = body.get("weight") if isinstance(body, dict) else None
    if not isinstance(weight, int | float) or isinstance(weight, bool) or weight <= 0:
        raise ConfigError("'weight' must be a number > 0")
    state.pool.set_weight(bid, float(weight))
    return web.json_response({"id": bid, "weight": float(weight)})


async def _get_policy(state: RouterState, request: web.Request) -> web.Response:
    cfg = state.cfg.policy
    config = cfg if isinstance(cfg, str) else dict(cfg)
    kv = [{"endpoint": s.endpoint, "backends": list(s.backends.values())} for s in state.kv_sources]
    return web.json_response(
        {"name": state.policy_name, "config": config, "index": state.core.policy.index, "kv_sources": kv}
    )


async def _set_policy(state: RouterState, request: web.Request) -> web.Response:
    body = await _json(request)
    if not isinstance(body, str | dict):
        raise ConfigError("the policy is a preset name or a policy object")
    policy = build_policy(body)
    state.core.policy = policy
    state.policy_name = body if isinstance(body, str) else policy.name
    return web.json_response({"name": state.policy_name})


def upstreams_view(state: RouterState) -> dict[str, Any]:
    cfg = state.core.policy.upstreams
    return {
        "weights": dict(cfg.weights) if cfg else {},
        "mirror": {"to": cfg.mirror_to, "percent": cfg.mirror_percent} if cfg and cfg.mirror_to else None,
        "annotations": dict(state.upstream_annotations),
        "version": state.upstream_version,
        "served": _served(state),
    }


def _served(state: RouterState) -> dict[str, int]:
    """Requests each group answered to a client (failed attempts, retried elsewhere, are not served)."""
    served: dict[str, int] = {}
    for (upstream, status), n in state.metrics.upstream_requests.items():
        if status not in ("5xx", "failed"):
            served[upstream] = served.get(upstream, 0) + n
    return served


async def _get_upstreams(state: RouterState, request: web.Request) -> web.Response:
    return web.json_response(upstreams_view(state), headers={"etag": str(state.upstream_version)})


async def _set_upstreams(state: RouterState, request: web.Request) -> web.Response:
    expected = request.headers.get("if-match")
    if expected is not None and expected.strip('"') != str(state.upstream_version):
        return _error(412, f"stale version {expected}; current is {state.upstream_version}")
    body = await _json(request)
    if not isinstance(body, dict):
        raise ConfigError("expected an object with 'weights' (and optionally 'mirror', 'annotations')")
    annotations = body.pop("annotations", None)
    if annotations is not None and not isinstance(annotations, dict):
        raise ConfigError("'annotations' must be an object of strings")
    cfg = parse_upstreams(body)
    state.core.policy = replace(state.core.policy, upstreams=cfg if cfg.weights or cfg.mirror_to else None)
    if annotations is not None:
        state.upstream_annotations = {str(k): str(v) for k, v in annotations.items()}
    state.upstream_version += 1
    view = upstreams_view(state)
    return web.json_response(view, headers={"etag": str(state.upstream_version)})


async def _json(request: web.Request, default: Any = None) -> Any:
    if not request.can_read_body:
        if default is not None:
            return default
        raise ConfigError("a JSON body is required")
    try:
        return await request.json()
    except ValueError:
        raise ConfigError("the body is not valid JSON") from None


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": {"message": message, "code": status}}, status=status)
