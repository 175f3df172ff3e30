"""Probing a running router (``infctl router``) over HTTP; verdicts come from ``router_eval``."""

from __future__ import annotations

import asyncio

import httpx

from infctl.doctor import router_eval as ev
from infctl.doctor.http import Answer, fetch
from infctl.doctor.result import CheckResult, failed, passed, skipped, warned
from infctl.doctor.targets import RouterTarget
from infctl.errors import MetricsError
from infctl.router.admin_validate import DEFAULT_TOKEN_ENV
from infctl.telemetry import parse_metrics, value

KV_BATCHES = "infctl_router_kv_event_batches_total"
ADMIN_TOKEN_ENV = DEFAULT_TOKEN_ENV
"""Where ``infctl doctor`` reads the router's admin token (the router's own default)."""
LATER = ("ready", "admin", "backends", "signals", "policy", "tokens")
TOKEN_PROBE = [
    {"role": "system", "content": "You answer operators of LLM inference fleets. 你是一个乐于助人的助手。"},
    {"role": "user", "content": "How many tokens is this? 这句话有多少个词元\uff1f def f(x): return x * 2"},
]
"""A chat in English, Chinese and code: tokenizers that differ disagree on it."""


async def check_router(
    client: httpx.AsyncClient, target: RouterTarget, *, token_fix: str | None = None
) -> list[CheckResult]:
    """Health, readiness, whether the admin API wants a token, backends, signal freshness and policy of
    the router at ``target.url``. ``token_fix``: what to do when the admin API wants a token doctor has
    not got (default: export it)."""
    url, t = target.url.rstrip("/"), target.url
    health = await fetch(client, "GET", url + "/health")
    if health.status != 200:
        found = health.error if health.status is None else f"HTTP {health.status}"
        return [
            failed(
                "router",
                "health",
                f"GET /health: {found}",
                "check that the router runs (infctl status, kubectl get pods) and the URL",
                target=t,
            ),
            *(skipped("router", name, "router unreachable", target=t) for name in LATER),
        ]
    ready, backends, policy, metrics = await asyncio.gather(
        fetch(client, "GET", url + "/ready"),
        fetch(client, "GET", url + "/admin/backends", token=target.admin_token),
        fetch(client, "GET", url + "/admin/policy", token=target.admin_token),
        fetch(client, "GET", url + "/metrics"),
    )
    results = [
        passed("router", "health", "up (GET /health: 200)", target=t),
        ev.evaluate_ready(ready.status, ready.body, target=t),
    ]
    # Whether the admin API is open: asked without a token (the answer above used ours, if we have one).
    bare = backends if target.admin_token is None else await fetch(client, "GET", url + "/admin/backends")
    admin = ev.evaluate_admin_auth(bare.status, url, target=t)
    results += [admin] if admin is not None else []
    denied = _admin_denied(backends, t, token_fix or f"export {ADMIN_TOKEN_ENV} as the router has it")
    if denied is not None:
        return [*results, denied]
    rows = backends.body.get("backends", []) if isinstance(backends.body, dict) else []
    config = policy.body.get("config") if isinstance(policy.body, dict) else None
    results.append(ev.evaluate_backends(rows, target=t))
    results.append(ev.evaluate_freshness(rows, ev.stale_after(config), target=t))
    results += ev.evaluate_policy(config, rows, kv_batches=_kv_batches(metrics), target=t)
    results.append(await _tokens(client, url, rows, t))
    return results


async def _tokens(client: httpx.AsyncClient, url: str, rows: list[dict[str, object]], t: str) -> CheckResult:
    """The router's count of a probe chat against the first live engine's own ``/tokenize``."""
    engine = next((str(b["url"]) for b in rows if b.get("url") and not b.get("ejected")), None)
    models = await fetch(client, "GET", url + "/v1/models")
    data = models.body.get("data", []) if isinstance(models.body, dict) else []
    model = str(data[0].get("id", "")) if data and isinstance(data[0], dict) else ""
    probe = {"model": model, "messages": TOKEN_PROBE}
    ours = await fetch(client, "POST", url + "/tokenize", probe)
    theirs = await fetch(client, "POST", engine + "/tokenize", probe) if engine else None
    return ev.evaluate_tokens(
        ours.body if ours.status == 200 else None,
        theirs.body if theirs is not None and theirs.status == 200 else None,
        engine or "",
        target=t,
    )


def _admin_denied(answer: Answer, target: str, token_fix: str) -> CheckResult | None:
    if answer.status == 401:
        return warned(
            "router",
            "backends",
            "the admin API wants a bearer token; backends, signals and policy not checked",
            token_fix,
            target=target,
        )
    if answer.status != 200:
        found = answer.error if answer.status is None else f"HTTP {answer.status}"
        return failed(
            "router",
            "backends",
            f"GET /admin/backends: {found}",
            "is this an infctl router? doctor reads its admin API",
            target=target,
        )
    return None


def _kv_batches(metrics: Answer) -> float | None:
    if metrics.status != 200:
        return None
    try:
        return value(parse_metrics(metrics.text, {KV_BATCHES}), KV_BATCHES)
    except MetricsError:
        return None
