"""Pure decisions of the admin API: who may call it, and what its request bodies may say.

Every function here either returns clean values or raises ``ConfigError`` with a message naming the field,
which the admin handlers answer as a 400 in the router's OpenAI error shape. Nothing here does I/O.

Authentication (RFC 6750 / RFC 7235): the scheme ``Bearer`` is matched case-insensitively, the token exactly
(constant time). A missing, malformed or wrong token is a 401 with a ``WWW-Authenticate: Bearer`` challenge
(RFC 6750 section 3.1 makes an invalid token a 401; 403 is for a valid token lacking scope, and this API has
a single scope, so no token is ever answered 403).

Browsers: a web page the operator opens can send requests to the router (a form or ``fetch`` in no-cors mode
posts ``text/plain`` cross-site without asking; DNS rebinding makes the page's own name resolve to
127.0.0.1). So, token or not, a write must be ``Content-Type: application/json`` (415), which a page can
send cross-site only after a CORS preflight the router never grants, and must not come from another site's
``Origin`` (403). A router without a token listens on loopback only (:func:`check_exposure`) and answers
the admin API only to requests whose ``Host`` is a loopback name (403), which a rebound name is not.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import math
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from pydantic import ValidationError

from infctl.config.router import ADMIN_TOKEN_ENV, BackendEntry
from infctl.errors import ConfigError
from infctl.hosts import is_loopback
from infctl.manifests.admin_secret import TOKEN_KEY, default_secret_name
from infctl.router.config import backend_id, backend_of
from infctl.router.policies.weights import UpstreamConfig
from infctl.router.snapshot import Backend

DEFAULT_TOKEN_ENV = ADMIN_TOKEN_ENV
"""Where the token is read from when the router file names no ``admin_token_env``
(:data:`infctl.config.router.ADMIN_TOKEN_ENV`)."""
_KV_SCHEMES = ("tcp://", "ipc://")
_DEFAULT_PORTS = {"http": 80, "https": 443}
WRITES = frozenset({"POST", "PUT", "DELETE", "PATCH"})
"""Methods that change the router: JSON only, never cross-site."""


def check_exposure(host: str, token: str | None, *, insecure: bool) -> None:
    """Refuse to serve an admin API without a token beyond loopback (ConfigError: the router does not
    start), unless the operator said ``insecure`` (``--insecure-admin``, the file's ``insecure_admin``)."""
    if token is not None or insecure or is_loopback(host):
        return
    raise ConfigError(
        f"--host {host} without an admin token would open the admin API (add/remove backends, change "
        "weights) to anyone who reaches it: refusing to start",
        hint=f"set {DEFAULT_TOKEN_ENV} (or admin_token_env in the router file), or listen on 127.0.0.1; "
        "--insecure-admin (insecure_admin: true) starts anyway",
    )


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
    url = entry.url.rstrip("/")  # its form checked by the model (check_engine_url)
    kv = entry.kv_events
    if kv is not None and not kv.startswith(_KV_SCHEMES):
        raise ConfigError(f"kv_events: expected a ZMQ endpoint such as tcp://10.0.0.7:5557, got {kv!r}")
    return backend_of(entry, entry.id or backend_id(url, entry.dp_rank)), kv


def with_path_id(body: Any, backend_id: str) -> Any:
    """A ``PUT /admin/backends/{id}`` body with the path's id (the body may repeat it, not contradict it)."""
    if not isinstance(body, dict):
        return body  # backend_from_json names the problem
    given = body.get("id", backend_id)
    if given != backend_id:
        raise ConfigError(f"id: the body names {given!r} but the path names {backend_id!r}")
    return {**body, "id": backend_id}


def _problem(err: ValidationError) -> ConfigError:
    """The first problem, by field name (and how many more there are)."""
    first = err.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "backend"
    more = f" (and {err.error_count() - 1} more)" if err.error_count() > 1 else ""
    hint = "fields: " + ", ".join(BackendEntry.model_fields) if first["type"] == "extra_forbidden" else None
    cause = first.get("ctx", {}).get("error") if first["type"] == "value_error" else None
    if cause is not None:  # our own validator's words, which already say what was found
        return ConfigError(f"{where}: {cause}{more}", hint=hint)
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


def refuse_write(content_type: str | None, origin: str | None, host: str | None) -> tuple[int, str] | None:
    """Why an admin write (``WRITES``) is refused, as (status, message); None when it may proceed.

    403 when ``Origin`` names another site than the ``Host`` the request was sent to (``null``, what a
    sandboxed or privacy-minded page sends, counts as another site; no ``Origin``, a non-browser client,
    passes); 415 unless the media type is ``application/json`` (even for a DELETE or a drain without a
    body: one rule, no exceptions to reason about)."""
    if origin is not None and not same_site(origin, host):
        return 403, f"cross-site admin write refused (Origin {origin!r}, Host {host!r})"
    media = (content_type or "").partition(";")[0].strip().lower()
    if media != "application/json":
        shown = content_type or "none"
        return 415, f"admin writes need Content-Type: application/json (got {shown})"
    return None


def same_site(origin: str, host: str | None) -> bool:
    """Whether ``Origin`` (``scheme://host[:port]``) is the ``Host`` header's host and port. A Host without
    a port takes the Origin scheme's default, so a router behind a TLS proxy (Origin ``https://x``, Host
    ``x``) is its own site."""
    if not host:
        return False
    try:
        o = urlsplit(origin.strip())
        h = urlsplit("//" + host.strip())
        default = _DEFAULT_PORTS.get(o.scheme.lower())
        o_port, h_port = o.port or default, h.port or default
    except ValueError:
        return False
    if default is None or not o.hostname or "@" in o.netloc:
        return False
    return (o.hostname, o_port) == (h.hostname, h_port)


def loopback_host(host: str | None) -> bool:
    """Whether a ``Host`` header names this machine's loopback (``127.0.0.1:8000``, ``localhost``,
    ``[::1]:8000``): what a client of a router listening on loopback sends, and what a page on a name
    rebound to 127.0.0.1 does not."""
    try:
        name = urlsplit("//" + (host or "").strip()).hostname
    except ValueError:
        return False
    return name is not None and is_loopback(name)


def if_match_problem(if_match: str | None, version: int) -> tuple[int, str] | None:
    """An upstream write's precondition (RFC 9110 section 13.1.1): 428 without ``If-Match``, 412 when
    none of its entity tags is the current version (``"3"`` and ``3`` both name version 3; weak tags never
    match; ``*`` matches whatever is current). None when the write may proceed."""
    if if_match is None or not if_match.strip():
        return 428, (
            f"upstream writes need If-Match: the version they were decided on (current: {version}; "
            "GET /admin/upstreams gives it as ETag and 'version')"
        )
    tags = [t.strip() for t in if_match.split(",")]
    if "*" in tags or any(t.strip('"') == str(version) for t in tags if not t.startswith("W/")):
        return None
    return 412, f"stale version {if_match}; current is {version}"


def check_weights(cfg: UpstreamConfig, known: Iterable[str]) -> None:
    """Refuse weights for a group the router does not know (no backend has it and the router's config does
    not name it): the split would send that share nowhere."""
    groups = set(known)
    unknown = sorted(set(cfg.weights) - groups)
    if unknown:
        raise ConfigError(
            f"weights: unknown upstream group {', '.join(repr(u) for u in unknown)}",
            hint=f"known groups: {', '.join(sorted(groups)) or 'none'} (a backend's 'upstream')",
        )
