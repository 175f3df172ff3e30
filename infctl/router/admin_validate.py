"""Pure decisions of the admin API: who may call it, and what its request bodies may say.

Every function here either returns clean values or raises ``ConfigError`` with a message naming the field,
which the admin handlers answer as a 400 in the router's OpenAI error shape. Nothing here does I/O.

Authentication (RFC 6750 / RFC 7235): the scheme ``Bearer`` is matched case-insensitively, the token exactly
(constant time). A missing, malformed or wrong token is a 401 with a ``WWW-Authenticate: Bearer`` challenge
(RFC 6750 section 3.1 makes an invalid token a 401; 403 is for a valid token lacking scope, and this API has
a single scope, so it never answers 403).
"""

from __future__ import annotations

import contextlib
import hmac
import json
import math
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from pydantic import ValidationError

from infctl.config.router import ADMIN_TOKEN_ENV, BackendEntry
from infctl.errors import ConfigError
from infctl.manifests.admin_secret import TOKEN_KEY, default_secret_name
from infctl.router.config import backend_id
from infctl.router.policies.weights import UpstreamConfig
from infctl.router.snapshot import Backend

DEFAULT_TOKEN_ENV = ADMIN_TOKEN_ENV
"""Where the token is read from when the router file names no ``admin_token_env``
(:data:`infctl.config.router.ADMIN_TOKEN_ENV`)."""
_KV_SCHEMES = ("tcp://", "ipc://")


def admin_token_from_env(env_name: str | None, environ: Mapping[str, str]) -> str | None:
    """The admin bearer token, failing closed.

    - ``env_name`` set (the file's ``admin_token_env``, as every rendered deployment has): the variable must
      hold a token; unset or empty raises ConfigError, so the router refuses to start rather than serve an
      open admin API to whoever reaches it.
    - ``env_name`` None: ``INFCTL_ROUTER_ADMIN_TOKEN`` if set; unset returns None (open admin API, for local
      use; the router warns at startup); set but empty raises ConfigError.

    Surrounding whitespace is dropped (a secret made with ``--from-file`` often ends in a newline); a token
    with whitespace inside cannot be sent as a bearer token and raises ConfigError."""
    name = env_name or DEFAULT_TOKEN_ENV
    raw = environ.get(name)
    if raw is None and env_name is None:
        return None
    token = (raw or "").strip()
    if not token:
        state = "is not set" if raw is None else "is empty"
        raise ConfigError(
            f"admin_token_env names {name}, which {state}: refusing to start with an open admin API",
            hint=f"set {name} to the admin token (in Kubernetes: key '{TOKEN_KEY}' of Secret "
            f"'{default_secret_name('<release>')}', or the one deploy was given with --admin-token-secret), "
            "or drop admin_token_env to run without one on a loopback address",
        )
    if any(c.isspace() for c in token):
        raise ConfigError(f"{name}: the admin token contains whitespace", hint="use a token without spaces")
    return token


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header (scheme case-insensitive), else None."""
    scheme, _, token = (authorization or "").strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    return token


def authorized(authorization: str | None, expected: str | None) -> bool:
    """Whether a request with this ``Authorization`` header may use the admin API (``expected`` None:
    open)."""
    if expected is None:
        return True
    given = bearer_token(authorization)
    # aiohttp decodes header bytes that are not UTF-8 with surrogateescape: encode them back the same way
    # (a plain encode() raises on such a header, and the client would get a 500 instead of a 401).
    return given is not None and hmac.compare_digest(
        given.encode("utf-8", "surrogateescape"), expected.encode("utf-8", "surrogateescape")
    )


def parse_json(raw: str) -> Any:
    """A request body as JSON; NaN, Infinity (which Python's json accepts) and numbers that overflow to
    infinity (``1e999``) are refused, so no weight or percentage can be non-finite."""

    def no_constants(name: str) -> Any:
        raise ConfigError(f"the body contains {name}, which is not JSON", hint="send finite numbers")

    def finite(text: str) -> float:
        value = float(text)
        if not math.isfinite(value):
            raise ConfigError(f"the number {text} is out of range", hint="send finite numbers")
        return value

    try:
        return json.loads(raw, parse_constant=no_constants, parse_float=finite)
    except ValueError as exc:
        raise ConfigError(f"the body is not valid JSON: {exc}") from None


def backend_from_json(body: Any) -> tuple[Backend, str | None]:
    """A ``POST /admin/backends`` body -> (backend, KV-events endpoint or None).

    Fields and their rules are the router file's backend entry (``infctl.config.router.BackendEntry``),
    checked strictly: no strings for numbers, no booleans for numbers, ``models`` a list of strings. The URL
    must be ``http(s)://host[:port]``. The id defaults as in the router file: the URL, plus ``#dpN``."""
    if not isinstance(body, dict):
        raise ConfigError("a backend is a JSON object with at least a 'url'")
    try:
        entry = BackendEntry.model_validate(body, strict=True)
    except ValidationError as err:
        raise _problem(err) from None
    url = entry.url.rstrip("/")
    _check_url(url)
    kv = entry.kv_events
    if kv is not None and not kv.startswith(_KV_SCHEMES):
        raise ConfigError(f"kv_events: expected a ZMQ endpoint such as tcp://10.0.0.7:5557, got {kv!r}")
    backend = Backend(
        id=entry.id or backend_id(url, entry.dp_rank),
        url=url,
        role=entry.role,
        group=entry.group,
        pool=entry.pool,
        upstream=entry.upstream,
        engine=entry.engine or "",
        dp_rank=entry.dp_rank,
        weight=entry.weight,
        models=tuple(entry.models),
        bootstrap_port=entry.bootstrap_port,
    )
    return backend, kv


def with_path_id(body: Any, backend_id: str) -> Any:
    """A ``PUT /admin/backends/{id}`` body with the path's id (the body may repeat it, not contradict it)."""
    if not isinstance(body, dict):
        return body  # backend_from_json names the problem
    given = body.get("id", backend_id)
    if given != backend_id:
        raise ConfigError(f"id: the body names {given!r} but the path names {backend_id!r}")
    return {**body, "id": backend_id}


def _check_url(url: str) -> None:
    parts = urlsplit(url)
    try:
        parts.port  # noqa: B018 (raises ValueError on a bad port)
    except ValueError as exc:
        raise ConfigError(f"url: {exc} in {url!r}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"url: expected http(s)://host[:port], got {url!r}")


def _problem(err: ValidationError) -> ConfigError:
    """The first problem, by field name (and how many more there are)."""
    first = err.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "backend"
    more = f" (and {err.error_count() - 1} more)" if err.error_count() > 1 else ""
    hint = "fields: " + ", ".join(BackendEntry.model_fields) if first["type"] == "extra_forbidden" else None
    return ConfigError(f"{where}: {first['msg']}, got {first['input']!r}{more}", hint=hint)


def draining_flag(body: Any) -> bool:
    """A drain body: none or ``{}`` drains; ``{"draining": false}`` undoes it. Only JSON booleans count."""
    if body is None:
        return True
    if not isinstance(body, dict) or set(body) - {"draining"}:
        raise ConfigError('expected no body or {"draining": true|false}')
    value = body.get("draining", True)
    if not isinstance(value, bool):
        raise ConfigError(f"draining: expected true or false, got {value!r}")
    return value


def positive_weight(body: Any) -> float:
    """A ``{"weight": w}`` body: w a finite number > 0."""
    weight = body.get("weight") if isinstance(body, dict) else None
    value = math.nan
    if isinstance(weight, int | float) and not isinstance(weight, bool):
        with contextlib.suppress(OverflowError):  # an integer too large for a float
            value = float(weight)
    if not 0 < value < math.inf:
        raise ConfigError(f"weight: expected a finite number > 0, got {weight!r}")
    return value


def upstreams_raw(cfg: UpstreamConfig | None) -> dict[str, Any] | None:
    """The config form of active upstream weights (what ``parse_upstreams`` reads back), None when unset."""
    if cfg is None or not (cfg.weights or cfg.mirror_to):
        return None
    raw: dict[str, Any] = {"weights": dict(cfg.weights)}
    if cfg.mirror_to:
        raw["mirror"] = {"to": cfg.mirror_to, "percent": cfg.mirror_percent}
    return raw


def active_config(config: str | Mapping[str, Any], upstreams: UpstreamConfig | None) -> str | dict[str, Any]:
    """The policy config as it routes now: the last one set, with the upstream weights that are active
    (they change through ``/admin/upstreams`` too). ``build_policy`` of the result gives the active policy."""
    raw = upstreams_raw(upstreams)
    if isinstance(config, str):
        return config if raw is None else {"preset": config, "upstreams": raw}
    out = {k: v for k, v in config.items() if k != "upstreams"}
    if raw is not None:
        out["upstreams"] = raw
    return out
