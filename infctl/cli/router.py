"""``infctl router``: the cache-, load- and length-aware router daemon."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError

from infctl.cli.flags import duration_option, field_help, url_option
from infctl.cli.output import errors_as_exit, fail, say
from infctl.config import RouterFile
from infctl.config.router import HealthPolicy, RouterOptions, parse_url_spec
from infctl.errors import ConfigError
from infctl.router.admin_validate import admin_token_from_env, check_exposure
from infctl.router.config import from_file
from infctl.router.policies import build_policy
from infctl.router.server import LoopKind, UpstreamClient, loop_factory, run

EXAMPLES = """
Examples:

  # Two engines, cache- and load-aware routing
  infctl router --port 8000 --backend http://127.0.0.1:8101 --backend http://127.0.0.1:8102

  # A PD group: prefill and decode roles, vLLM's two-step protocol
  infctl router --backend http://10.0.0.1:8000,role=prefill,group=g0 --backend http://10.0.0.2:8000,role=decode,group=g0

  # Everything else (buckets, weights, settings) from a file; flags given here win
  infctl router -f router.yaml --port 9000

  # The front is lean by default (the generation POSTs parsed by infctl, the rest by aiohttp), with limits
  # on slow or many clients in router.yaml: header_timeout_s (10), body_timeout_s (30): a request not whole
  # in time gets a 408 and is cut; keepalive_timeout_s (75): an idle connection is kept this long;
  # max_connections (10000): at the limit the longest-idle connection is closed, else a 503. aiohttp's
  # front for everything instead (router.yaml: server: aiohttp):
  infctl router -f router.yaml --server aiohttp

  # Engines found in Kubernetes (router.yaml: discovery: {namespace: llm, selector: infctl.io/release=ds3}):
  # ready pods are watched (one list, then long watches resumed from the last resourceVersion), never polled
  infctl router -f router.yaml

Kubernetes discovery reads each pod's labels (else annotations): infctl.io/role (prefill|decode|both),
infctl.io/group, infctl.io/pool, infctl.io/engine, infctl.io/upstream (cutover/split group),
infctl.io/data-parallel-size (N: one backend per DP rank), infctl.io/kv-events (port or tcp:// endpoint;
default the container port named kv-events; DP rank r publishes on port + r). The HTTP port is the
container port named http. infctl render sets role, group, pool, engine, data-parallel-size and the
named ports.

Admin API, bearer token from INFCTL_ROUTER_ADMIN_TOKEN (or the variable the file's admin_token_env names;
if that variable is unset or empty the router refuses to start). Without any token the admin API is open
to local processes only: the router refuses a --host beyond loopback unless --insecure-admin (the file's
insecure_admin: true), and answers admin requests only for a loopback Host. Writes (POST/PUT/DELETE) need
Content-Type: application/json and no cross-site Origin (415, 403); PUT /admin/upstreams needs If-Match
with the version GET /admin/upstreams gives (ETag; 428 without it, 412 when stale).
  GET/POST /admin/backends (POST adds; an id that exists is a 409), PUT /admin/backends/ID (add or
  replace: drain state, health and in-flight counts kept), DELETE /admin/backends/ID,
  POST /admin/backends/ID/drain, PUT /admin/backends/ID/weight, GET/PUT /admin/policy,
  GET/PUT /admin/upstreams (If-Match: VERSION)
"""

_LOOPS: dict[str, LoopKind] = {"auto": "auto", "uvloop": "uvloop", "asyncio": "asyncio"}
_CLIENTS: dict[str, UpstreamClient] = {"lean": "lean", "aiohttp": "aiohttp"}
_BACKEND_KEYS = (
    "role",
    "group",
    "pool",
    "upstream",
    "engine",
    "dp_rank",
    "dp_size",
    "weight",
    "id",
    "kv_events",
    "bootstrap_port",
)


def _help(name: str) -> str:
    """A flag's help is the doc of the router setting it sets (``RouterOptions``), default included."""
    return field_help(RouterOptions, name)


def _health_help(name: str) -> str:
    return field_help(HealthPolicy, name, key=f"health.{name}")


def parse_backend(spec: str) -> dict[str, Any]:
    """``URL[,key=value...]`` -> a backend entry mapping (validated later with the router file's model)."""
    return parse_url_spec(spec, flag="--backend", keys=_BACKEND_KEYS)


def router(
    file: Annotated[
        Path | None, typer.Option("-f", "--file", help="Router YAML (see infctl.config.router).")
    ] = None,
    backends: Annotated[
        list[str] | None,
        url_option(
            "--backend",
            spec=True,
            metavar="URL[,role=..,group=..]",
            help="An engine to route to (repeatable).",
        ),
    ] = None,
    policy: Annotated[str | None, typer.Option("--policy", help=_help("policy"))] = None,
    host: Annotated[str | None, typer.Option("--host", help=_help("host"))] = None,
    port: Annotated[int | None, typer.Option("--port", help=_help("port"))] = None,
    engine: Annotated[str | None, typer.Option("--engine", help=_help("engine"))] = None,
    scrape_interval: Annotated[
        float | None, duration_option("--scrape-interval", help=_help("scrape_interval_s"))
    ] = None,
    health_interval: Annotated[
        float | None, duration_option("--health-interval", help=_help("health_interval_s"))
    ] = None,
    pd_mode: Annotated[str | None, typer.Option("--pd-mode", help=_help("pd_mode"))] = None,
    block_size: Annotated[int | None, typer.Option("--block-size", help=_help("block_size"))] = None,
    tokenizer: Annotated[str | None, typer.Option("--tokenizer", help=_help("tokenizer"))] = None,
    probe_timeout: Annotated[
        float | None, duration_option("--probe-timeout", help=_help("probe_timeout_s"))
    ] = None,
    failures_to_eject: Annotated[
        int | None, typer.Option("--failures-to-eject", help=_health_help("failures_to_eject"))
    ] = None,
    max_backoff: Annotated[
        float | None, duration_option("--max-backoff", help=_health_help("max_backoff_s"))
    ] = None,
    admission_queue: Annotated[
        int | None, typer.Option("--admission-queue", help=_help("admission_queue"))
    ] = None,
    admission_deadline: Annotated[
        float | None, duration_option("--admission-deadline", help=_help("admission_deadline_s"))
    ] = None,
    hold_when_empty: Annotated[
        float | None, duration_option("--hold-when-empty", help=_help("hold_when_empty_s"))
    ] = None,
    short_prompt_tokens: Annotated[
        int | None, typer.Option("--short-prompt-tokens", help=_help("short_prompt_tokens"))
    ] = None,
    max_prompt_chars: Annotated[
        int | None, typer.Option("--max-prompt-chars", help=_help("max_prompt_chars"))
    ] = None,
    max_body_bytes: Annotated[
        int | None, typer.Option("--max-body-bytes", help=_help("max_body_bytes"))
    ] = None,
    loop: Annotated[
        str,
        typer.Option(
            "--loop",
            help="Event loop: auto (uvloop when installed: infctl's 'fast' extra), uvloop or asyncio.",
        ),
    ] = "auto",
    upstream_client: Annotated[
        str,
        typer.Option(
            "--upstream-client",
            hidden=True,
            help="lean (infctl's HTTP/1.1 relay) or aiohttp: how generation requests reach the engines.",
        ),
    ] = "lean",
    insecure_admin: Annotated[
        bool | None,
        typer.Option("--insecure-admin", help=_help("insecure_admin"), show_default=False),
    ] = None,
    server: Annotated[str | None, typer.Option("--server", help=_help("server"))] = None,
    trust_request_chat_template: Annotated[
        bool | None,
        typer.Option(
            "--trust-request-chat-template", help=_help("trust_request_chat_template"), show_default=False
        ),
    ] = None,
) -> None:
    """Route OpenAI requests across engines by prefix cache, load and length; eject and re-admit failures.

    --policy takes a preset name or a JSON policy object ({"preset": ..., "settings": {...}, ...})."""
    with errors_as_exit():
        flags: dict[str, Any] = {
            "policy": _policy(policy),
            "host": host,
            "port": port,
            "engine": engine,
            "scrape_interval_s": scrape_interval,
            "health_interval_s": health_interval,
            "pd_mode": pd_mode,
            "block_size": block_size,
            "tokenizer": tokenizer,
            "probe_timeout_s": probe_timeout,
            "admission_queue": admission_queue,
            "admission_deadline_s": admission_deadline,
            "hold_when_empty_s": hold_when_empty,
            "short_prompt_tokens": short_prompt_tokens,
            "max_prompt_chars": max_prompt_chars,
            "max_body_bytes": max_body_bytes,
            "server": server,
            "insecure_admin": insecure_admin,
            "trust_request_chat_template": trust_request_chat_template,
        }
        health = {"failures_to_eject": failures_to_eject, "max_backoff_s": max_backoff}
        if any(v is not None for v in health.values()):
            flags["health"] = {k: v for k, v in health.items() if v is not None}
        if backends:
            flags["backends"] = [parse_backend(b) for b in backends]
        rf = _router_file(file, flags)
        cfg = from_file(rf, admin_token=admin_token_from_env(rf.admin_token_env, os.environ))
        check_exposure(cfg.host, cfg.admin_token, insecure=cfg.insecure_admin)  # before the port opens
        build_policy(cfg.policy)  # a bad policy fails here, before the port opens
        kind = _LOOPS.get(loop)
        if kind is None:
            raise ConfigError(f"--loop {loop}: expected {', '.join(_LOOPS)}")
        loop_factory(kind)  # so does --loop uvloop without uvloop
        client = _CLIENTS.get(upstream_client)
        if client is None:
            raise ConfigError(f"--upstream-client {upstream_client}: expected {', '.join(_CLIENTS)}")
    policy_name = cfg.policy if isinstance(cfg.policy, str) else "custom"

    def announce(url: str) -> None:  # once listening: tokenizer loaded, port bound (--port 0: its own)
        say(f"infctl router on {url} -> {len(cfg.backends)} backends, policy {policy_name}")

    try:
        with errors_as_exit():  # what fails at start-up (a tokenizer that does not load) is one line too
            run(cfg, loop=kind, upstream_client=client, server=cfg.server, on_listening=announce)
    except OSError as err:
        if err.errno not in _BIND_ERRORS:
            raise
        fail(bind_error(cfg.host, cfg.port, err))


_BIND_ERRORS = (errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EACCES)


def bind_error(host: str, port: int, err: OSError) -> ConfigError:
    """The one line a router that cannot open its port prints (exit code 2, as sim and autoscaler)."""
    reason = os.strerror(err.errno) if err.errno else str(err)
    if err.errno == errno.EADDRINUSE:
        hint = f"pick another --port, or stop what listens there (ss -ltnp 'sport = :{port}')"
    elif err.errno == errno.EACCES:
        hint = "ports below 1024 need privileges: pick --port 1024 or above"
    else:
        hint = "--host must be an address of this machine (127.0.0.1, 0.0.0.0 or an interface's)"
    return ConfigError(f"router cannot listen on {host}:{port}: {reason}", hint=hint)


def _policy(value: str | None) -> str | dict[str, Any] | None:
    if value is None or not value.lstrip().startswith("{"):
        return value
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"--policy: not a JSON object: {exc}") from None
    return parsed if isinstance(parsed, dict) else value


def _router_file(file: Path | None, flags: dict[str, Any]) -> RouterFile:
    """The file's settings (if any) with every flag that was given on top."""
    given = {k: v for k, v in flags.items() if v is not None}
    base: dict[str, Any] = {}
    if file:
        from infctl.config import load_router  # the YAML loader, only for a file (~25 ms of start-up)

        base = load_router(file).model_dump(exclude_unset=True)
    if not file and "backends" not in given:
        raise ConfigError("no backends", hint="give --backend URL (repeatable) or -f router.yaml")
    if "health" in given:  # a flag sets one key of the file's health section, not the whole section
        given["health"] = {**base.get("health", {}), **given["health"]}
    try:
        return RouterFile.model_validate({**base, **given})
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        cause = first.get("ctx", {}).get("error") if first["type"] == "value_error" else None
        raise ConfigError(f"{where}: {cause or first['msg']}", hint="see infctl router --help") from None


def register(app: typer.Typer) -> None:
    app.command(name="router", epilog=EXAMPLES)(router)
