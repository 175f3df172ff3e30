"""The admin API (bearer token): list, add, drain and remove backends; read and change the policy and weights.

Routes::

    GET    /admin/backends                 backends with health, load and counters
    POST   /admin/backends                 {"url": ..., "role": ..., "group": ..., "pool": ...} (the router
                                           file's backend fields, checked as strictly; 400 names the field):
                                           adds a backend; 409 when its id exists (nothing changes)
    PUT    /admin/backends/{id}            the same body: adds the backend, or replaces the definition of
                                           the one with that id (its drain state, health and in-flight
                                           counts are kept). The body's ``id``, if any, must be the path's
    DELETE /admin/backends/{id}            remove now (in-flight requests finish)
    POST   /admin/backends/{id}/drain      stop sending new requests; {"draining": false} undoes it
    PUT    /admin/backends/{id}/weight     {"weight": 2.0}
    GET    /admin/policy                   the active policy: its config (re-PUTable), every effective setting
    PUT    /admin/policy                   a preset name or policy dict; prefix indexes are kept, and so are
                                           the upstream weights unless the dict has an ``upstreams`` key
                                           (then it is an upstream write: If-Match honoured, version bumped)
    GET    /admin/upstreams                weighted upstream groups (as set, and as applied: by capacity
                                           while none are set), mirror, annotations, version (also the
                                           ETag header)
    PUT    /admin/upstreams                {"weights": {"old": 60, "new": 40}, "mirror": .., ...}
                                           with If-Match: <version> (428 without, 412 if stale); weights
                                           name known groups (a backend's or the config's), finite, >= 0,
                                           not all 0

Token: ``RouterConfig.admin_token`` (see :func:`admin_validate.admin_token_from_env` for how the CLI reads
it, failing closed). None leaves the API open on loopback only: the router refuses to listen elsewhere
without ``insecure_admin``, warns at startup, and answers admin requests only for a loopback ``Host``.
Writes (POST, PUT, DELETE) need ``Content-Type: application/json`` and no cross-site ``Origin``, token or
not (see :mod:`admin_validate`). Errors are the router's OpenAI-shaped errors: 400 bad body, 401 (with
``WWW-Authenticate: Bearer``) missing or wrong token, 403 cross-site or non-loopback Host, 404 unknown
backend, 409 backend id taken (POST), 412 stale If-Match, 415 not JSON, 428 no If-Match.

A backend id is often its URL (``http://10.0.0.7:8000``) and goes into the path as it is: the routes ending
in ``/drain`` and ``/weight`` are matched first.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from aiohttp import web

from infctl.errors import ConfigError
from infctl.hosts import is_loopback
from infctl.router.admin_validate import (
    WRITES,
    active_config,
    authorized,
    backend_from_json,
    bearer_token,
    check_weights,
    draining_flag,
    if_match_problem,
    loopback_host,
    parse_json,
    positive_weight,
    refuse_write,
    with_path_id,
)
from infctl.router.kv_events import KVSource
from infctl.router.parse_errors import coding_refusal
from infctl.router.policies import build_policy
from infctl.router.policies.weights import UpstreamConfig, applied_weights, parse_upstreams
from infctl.router.ranks import rank_endpoint
from infctl.router.requests import error_response
from infctl.router.snapshot import Backend

if TYPE_CHECKING:
    from infctl.router.state import RouterState

log = logging.getLogger(__name__)


@dataclass
class _Policy:
    config: str | Mapping[str, Any]
    """The policy config last set (at startup or by PUT /admin/policy): what GET /admin/policy reports."""
    named_groups: frozenset[str] = frozenset()
    """Upstream groups the router's own config names (weights, mirror): known before any backend has them."""


POLICY: web.AppKey[_Policy] = web.AppKey("admin_policy")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_KINDS = {
    400: "BadRequestError",
    401: "AuthenticationError",
    403: "PermissionDeniedError",
    404: "NotFoundError",
    409: "ConflictError",
    412: "PreconditionFailed",
    415: "UnsupportedMediaTypeError",
    428: "PreconditionRequired",
}


def add_routes(app: web.Application, state: RouterState) -> None:
    app[POLICY] = _Policy(state.cfg.policy, _named(state.core.policy.upstreams))
    token = state.cfg.admin_token
    # Without a token, only a loopback Host is answered: a page on a name rebound to 127.0.0.1 is not.
    loopback_only = token is None and not state.cfg.insecure_admin
    if token is None:
        log.warning(open_api_warning(state.cfg.host, state.cfg.port))

    def guarded(fn: Callable[[RouterState, web.Request], Awaitable[web.StreamResponse]]) -> Handler:
        async def handler(request: web.Request) -> web.StreamResponse:
            if (unread := coding_refusal(request)) is not None:
                return unread
            headers = request.headers
            header = headers.get("authorization")
            if not authorized(header, token):
                wrong = bearer_token(header) is not None
                return _unauthorized("wrong bearer token" if wrong else "missing bearer token", wrong=wrong)
            host = headers.get("host")
            if loopback_only and not loopback_host(host):
                return _error(403, f"admin API without a token answers loopback hosts only, not {host!r}")
            if request.method in WRITES and (
                refused := refuse_write(headers.get("content-type"), headers.get("origin"), host)
            ):
                return _error(*refused)
            try:
                return await fn(state, request)
            except ConfigError as exc:
                return _error(400, exc.message if exc.hint is None else f"{exc.message} ({exc.hint})")
            except KeyError as exc:
                return _error(404, str(exc.args[0]) if exc.args else "not found")

        return handler

    app.router.add_get("/admin/backends", guarded(_list))
    app.router.add_post("/admin/backends", guarded(_add))
    app.router.add_delete("/admin/backends/{id:.+}", guarded(_remove))
    app.router.add_post("/admin/backends/{id:.+}/drain", guarded(_drain))
    app.router.add_put("/admin/backends/{id:.+}/weight", guarded(_weight))
    app.router.add_put("/admin/backends/{id:.+}", guarded(_put))  # after /weight, which it would match
    app.router.add_get("/admin/policy", guarded(_get_policy))
    app.router.add_put("/admin/policy", guarded(_set_policy))
    app.router.add_get("/admin/upstreams", guarded(_get_upstreams))
    app.router.add_put("/admin/upstreams", guarded(_set_upstreams))


def open_api_warning(host: str, port: int) -> str:
    """The startup warning of a router without an admin token (louder when it listens beyond loopback)."""
    where = f"{host}:{port}"
    if is_loopback(host):
        return f"admin API on {where} has no bearer token: set INFCTL_ROUTER_ADMIN_TOKEN to require one"
    return (
        f"admin API on {where} is OPEN to anyone who can reach it (add/remove backends, change weights; "
        "--insecure-admin): set INFCTL_ROUTER_ADMIN_TOKEN, or admin_token_env in the router file"
    )


async def _list(state: RouterState, request: web.Request) -> web.Response:
    return web.json_response({"backends": state.pool.describe(asyncio.get_running_loop().time())})


async def _add(state: RouterState, request: web.Request) -> web.Response:
    backend, kv = backend_from_json(await _json(request))
    endpoint = _kv_endpoint(backend, kv)
    if backend.id in state.pool:
        # Replacing would be silent (and would undo a drain): the caller asks for it with PUT. The path is
        # escaped: a rank's id (URL#dpN) pasted unescaped would lose its "#dpN" as a URL fragment.
        path = f"/admin/backends/{quote(backend.id, safe=':/')}"
        return _error(409, f"backend {backend.id!r} exists; PUT {path} replaces it")
    _register(state, backend, endpoint)
    return web.json_response({"added": backend.id}, status=201)


async def _put(state: RouterState, request: web.Request) -> web.Response:
    bid = request.match_info["id"]
    backend, kv = backend_from_json(with_path_id(await _json(request), bid))
    endpoint = _kv_endpoint(backend, kv)
    if bid not in state.pool:
        _register(state, backend, endpoint)
        return web.json_response({"added": bid}, status=201)
    old = state.pool.backend(bid)
    if (old.url, old.dp_rank) != (backend.url, backend.dp_rank):
        state.core.forget(bid)  # another engine (or rank) now: what the indexes learned is not its cache
    state.unfollow_kv_events(bid)  # its events now come from ``endpoint`` (if any), not where they did
    _register(state, replace(backend, draining=old.draining), endpoint)
    return web.json_response({"replaced": bid, "draining": old.draining})


def _kv_endpoint(backend: Backend, kv: str | None) -> str | None:
    """Where ``backend`` publishes KV events: ``kv`` is the engine's base endpoint, as in the router file
    and discovery, and rank r publishes at base + r. Resolved before anything changes, so a body refused
    here (ConfigError: 400) changes nothing."""
    return rank_endpoint(kv, backend.dp_rank) if kv else None


def _register(state: RouterState, backend: Backend, endpoint: str | None) -> None:
    state.pool.add(backend)
    state.scrape_soon(backend.id)
    if endpoint:
        rank = backend.dp_rank
        state.follow_kv_events(KVSource(endpoint=endpoint, backends={rank: backend.id, None: backend.id}))


async def _remove(state: RouterState, request: web.Request) -> web.Response:
    bid = request.match_info["id"]
    if state.pool.remove(bid) is None:
        raise KeyError(f"unknown backend {bid!r}")
    state.unfollow_kv_events(bid)
    state.core.forget(bid)
    return web.json_response({"removed": bid})


async def _drain(state: RouterState, request: web.Request) -> web.Response:
    bid = request.match_info["id"]
    draining = draining_flag(await _json(request, optional=True))
    state.pool.set_draining(bid, draining)
    return web.json_response({"id": bid, "draining": draining, "inflight": state.pool.inflight(bid)})


async def _weight(state: RouterState, request: web.Request) -> web.Response:
    bid = request.match_info["id"]
    weight = positive_weight(await _json(request))
    state.pool.set_weight(bid, weight)
    return web.json_response({"id": bid, "weight": weight})


async def _get_policy(state: RouterState, request: web.Request) -> web.Response:
    policy = state.core.policy
    kv = [{"endpoint": s.endpoint, "backends": list(s.backends.values())} for s in state.kv_sources]
    return web.json_response(
        {
            "name": state.policy_name,
            "config": active_config(request.app[POLICY].config, policy.upstreams),
            "settings": asdict(policy.settings),
            "index": policy.index,
            "kv_sources": kv,
            "upstreams_version": state.upstream_version,
        },
        headers={"etag": _etag(state)},  # PUT /admin/policy with ``upstreams`` takes it as If-Match
    )


async def _set_policy(state: RouterState, request: web.Request) -> web.Response:
    """Replace the policy. The upstream weights are runtime state of /admin/upstreams: kept, unless the
    body sets ``upstreams`` itself, which is then a write of them like PUT /admin/upstreams."""
    body = await _json(request)
    if not isinstance(body, str | dict):
        raise ConfigError("the policy is a preset name or a policy object")
    writes_upstreams = isinstance(body, dict) and "upstreams" in body
    if writes_upstreams and (stale := _stale(state, request)) is not None:
        return stale
    policy = build_policy(body)
    if not writes_upstreams:
        policy = replace(policy, upstreams=state.core.policy.upstreams)
    elif policy.upstreams is not None:
        check_weights(policy.upstreams, _known_groups(state, request))
    state.core.policy = policy
    state.policy_name = body if isinstance(body, str) else policy.name
    request.app[POLICY].config = body
    if writes_upstreams:
        state.upstream_version += 1
    return web.json_response({"name": state.policy_name, "upstreams_version": state.upstream_version})


def upstreams_view(state: RouterState) -> dict[str, Any]:
    """``weights``: as set (empty: none); ``applied``: what the router splits by now, the set weights or,
    without any, each group's capacity (``applied_weights``; empty: one group, no split)."""
    cfg = state.core.policy.upstreams
    backends = [state.pool.backend(b) for b in state.pool.ids()]
    return {
        "weights": dict(cfg.weights) if cfg else {},
        "applied": dict(applied_weights(cfg, backends)),
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
    return web.json_response(upstreams_view(state), headers={"etag": _etag(state)})


async def _set_upstreams(state: RouterState, request: web.Request) -> web.Response:
    body = await _json(request)
    # The version check comes after the last await: checked before reading the body, two writers holding
    # the same version could both pass it and one update would be lost.
    if (stale := _stale(state, request)) is not None:
        return stale
    if not isinstance(body, dict):
        raise ConfigError("expected an object with 'weights' (and optionally 'mirror', 'annotations')")
    annotations = body.pop("annotations", None)
    if annotations is not None and not isinstance(annotations, dict):
        raise ConfigError("'annotations' must be an object of strings")
    cfg = parse_upstreams(body)
    check_weights(cfg, _known_groups(state, request))
    state.core.policy = replace(state.core.policy, upstreams=cfg if cfg.weights or cfg.mirror_to else None)
    if annotations is not None:
        state.upstream_annotations = {str(k): str(v) for k, v in annotations.items()}
    state.upstream_version += 1
    view = upstreams_view(state)
    return web.json_response(view, headers={"etag": _etag(state)})


def _etag(state: RouterState) -> str:
    """The upstream version as an entity tag (quoted; If-Match takes it quoted or bare)."""
    return f'"{state.upstream_version}"'


def _stale(state: RouterState, request: web.Request) -> web.Response | None:
    """A 428 without If-Match, a 412 when it names another upstream version than the current one."""
    problem = if_match_problem(request.headers.get("if-match"), state.upstream_version)
    return None if problem is None else _error(*problem)


def _named(cfg: UpstreamConfig | None) -> frozenset[str]:
    if cfg is None:
        return frozenset()
    return frozenset({*cfg.weights, *([cfg.mirror_to] if cfg.mirror_to else [])})


def _known_groups(state: RouterState, request: web.Request) -> set[str]:
    """Groups a weight may name: those of the router's backends and those its config names."""
    pool = state.pool
    return {pool.backend(b).upstream for b in pool.ids()} | request.app[POLICY].named_groups


async def _json(request: web.Request, *, optional: bool = False) -> Any:
    """The body as JSON; None when there is none and ``optional``."""
    raw = await request.text() if request.can_read_body else ""
    if not raw.strip():
        if optional:
            return None
        raise ConfigError("a JSON body is required")
    return parse_json(raw)


def _unauthorized(message: str, *, wrong: bool) -> web.Response:
    resp = _error(401, message)
    challenge = 'Bearer realm="infctl-router"'
    resp.headers["www-authenticate"] = challenge + (', error="invalid_token"' if wrong else "")
    return resp


def _error(status: int, message: str) -> web.Response:
    return error_response(status, message, kind=_KINDS.get(status, "BadRequestError"))
