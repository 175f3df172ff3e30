"""Pure verdicts on what the router answered: health and readiness, backends, signal freshness, policy.

Inputs are the router's own JSON (``/admin/backends``, ``/admin/policy``) and parsed ``/metrics``; the
policy is rebuilt with the router's ``build_policy`` so doctor reads it exactly as the router does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from infctl.config import DeploymentProfile
from infctl.doctor.result import CheckResult, Group, failed, passed, skipped, warned
from infctl.errors import ConfigError
from infctl.hosts import is_loopback
from infctl.router.policies import Policy, build_policy
from infctl.router.settings import PolicySettings

G: Group = "router"
Backends = Sequence[Mapping[str, Any]]
STALE_FAIL_FACTOR = 5
"""Signals older than this many times the policy's stale threshold fail; older than once, warn."""


def evaluate_ready(status: int | None, body: object, *, target: str = "") -> CheckResult:
    if status == 200:
        routable = body.get("routable") if isinstance(body, dict) else None
        return passed(G, "ready", f"ready, {routable} backends in rotation", target=target)
    return failed(
        G,
        "ready",
        f"GET /ready: HTTP {status}: {str(body)[:80]}",
        "no backend is in rotation: fix the engines listed under backends",
        target=target,
    )


def evaluate_admin_auth(status: int | None, url: str, *, target: str = "") -> CheckResult | None:
    """What ``GET /admin/backends`` without a token says about the admin API: 401 guarded, 200 open (a
    failure, or a warning on a loopback address, which every local user still reaches); None: unknown."""
    if status == 401:
        return passed(G, "admin", "the admin API requires a bearer token", target=target)
    if status != 200:
        return None
    host = urlsplit(url).hostname or ""
    loopback = is_loopback(host)
    fix = (
        "set admin_token_env in the router file and that variable to a token (infctl deploy does: "
        "Secret <release>-router-admin), or INFCTL_ROUTER_ADMIN_TOKEN for infctl router"
    )
    summary = "the admin API answers without a token: whoever reaches it can add backends and move traffic"
    return (warned if loopback else failed)(G, "admin", summary, fix, target=target)


def evaluate_backends(backends: Backends, *, target: str = "") -> CheckResult:
    """Every backend in rotation; ejected ones listed with the error that ejected them."""
    if not backends:
        return failed(
            G,
            "backends",
            "the router has no backends",
            "add engines: --backend URL, or POST /admin/backends",
            target=target,
        )
    ejected = [b for b in backends if b.get("ejected")]
    draining = [str(b.get("id")) for b in backends if b.get("draining")]
    if ejected:
        listed = "; ".join(f"{b.get('id')}: {b.get('last_error') or 'no error recorded'}" for b in ejected)
        return failed(
            G,
            "backends",
            f"{len(ejected)} of {len(backends)} ejected: {listed}",
            "check each with: infctl doctor --engine-url URL (a probe re-admits it once healthy)",
            target=target,
        )
    note = f" ({len(draining)} draining: {', '.join(draining)})" if draining else ""
    return passed(G, "backends", f"{len(backends)} in rotation{note}", target=target)


def evaluate_freshness(backends: Backends, stale_after_s: float, *, target: str = "") -> CheckResult:
    """Engine signals younger than the policy's stale threshold (stale counts as saturated)."""
    live = [b for b in backends if not b.get("ejected")]
    never = [str(b.get("id")) for b in live if b.get("signals_age_s") is None]
    ages = {str(b.get("id")): float(b["signals_age_s"]) for b in live if b.get("signals_age_s") is not None}
    limit_ms = stale_after_s * 1000
    old = {k: v for k, v in ages.items() if v > stale_after_s * STALE_FAIL_FACTOR}
    late = {k: v for k, v in ages.items() if stale_after_s < v <= stale_after_s * STALE_FAIL_FACTOR}
    if never or old:
        listed = [f"{k}: never scraped" for k in never] + [f"{k}: {v * 1000:.0f} ms" for k, v in old.items()]
        return failed(
            G,
            "signals",
            f"stale (limit {limit_ms:.0f} ms): {'; '.join(listed)}",
            "the router cannot read these engines' /metrics: check them with infctl doctor "
            "--engine-url URL (SGLang needs --enable-metrics)",
            target=target,
        )
    if late:
        listed = [f"{k}: {v * 1000:.0f} ms" for k, v in late.items()]
        return warned(
            G,
            "signals",
            f"late (limit {limit_ms:.0f} ms): {'; '.join(listed)}",
            "slow /metrics: lower the engines' load or raise stale_after_s",
            target=target,
        )
    newest = max(ages.values(), default=0.0) * 1000
    return passed(G, "signals", f"fresh: oldest {newest:.0f} ms (limit {limit_ms:.0f} ms)", target=target)


def policy_of(config: object) -> Policy:
    """The router's policy from ``/admin/policy``'s ``config`` (a preset name or a policy mapping)."""
    if not isinstance(config, str | Mapping):
        raise ConfigError(f"the router reports policy {str(config)[:60]!r}")
    return build_policy(config)


def stale_after(config: object) -> float:
    try:
        return policy_of(config).settings.stale_after_s
    except ConfigError:
        return PolicySettings().stale_after_s


def evaluate_policy(
    config: object, backends: Backends, *, kv_batches: float | None = None, target: str = ""
) -> list[CheckResult]:
    """Sanity of the policy against the backends it routes over."""
    try:
        policy = policy_of(config)
    except ConfigError as err:
        return [failed(G, "policy", err.message, err.hint, target=target)]
    findings = [*_pd_findings(backends, target)]
    routable = [b for b in backends if not b.get("ejected") and b.get("role", "both") != "prefill"]
    if policy.index != "none" and len(routable) == 1:
        findings.append(
            warned(
                G,
                "policy",
                f"{policy.name}: prefix-aware routing over a single backend has nothing to choose between",
                "add backends, or use --policy least_load",
                target=target,
            )
        )
    if policy.index == "precise" and not kv_batches:
        findings.append(
            warned(
                G,
                "policy",
                f"{policy.name}: the precise prefix index has received no KV events",
                "give each backend kv_events=tcp://HOST:PORT and start the engines with --kv-events-config",
                target=target,
            )
        )
    return findings or [
        passed(
            G, "policy", f"{policy.name} (index {policy.index}) suits {len(backends)} backends", target=target
        )
    ]


def _pd_findings(backends: Backends, target: str) -> list[CheckResult]:
    """Every group (or the whole pool) with one PD role needs the other."""
    roles: dict[str, set[str]] = {}
    for b in backends:
        roles.setdefault(str(b.get("group") or ""), set()).add(str(b.get("role", "both")))
    out = []
    for group, seen in sorted(roles.items()):
        where = f"group {group}" if group else "the pool"
        for have, lack in (("prefill", "decode"), ("decode", "prefill")):
            if have in seen and lack not in seen:
                out.append(
                    failed(
                        G,
                        "policy",
                        f"{where} has {have} backends and no {lack} backend",
                        f"add a {lack} engine to {where} (--backend URL,role={lack}"
                        f"{',group=' + group if group else ''})",
                        target=target,
                    )
                )
    return out


def evaluate_profile_policy(profile: DeploymentProfile) -> list[CheckResult]:
    """The profile's router policy builds, and a precise index has KV events to read."""
    target = f"profile {profile.name}"
    if not profile.router.enabled:
        return []
    config: str | dict[str, Any] = profile.router.policy
    if profile.router.settings:
        config = {"preset": profile.router.policy, "settings": profile.router.settings}
    try:
        policy = build_policy(config, path="router.policy")
    except ConfigError as err:
        return [failed(G, "policy", err.message, err.hint, target=target)]
    events = profile.model.kv_events
    if policy.index == "precise" and (events is None or not events.enabled):
        return [
            failed(
                G,
                "policy",
                f"{policy.name} builds its index from KV events, but the model publishes none",
                "add kv_events: {port: 5557} to the model profile",
                target=target,
            )
        ]
    return [passed(G, "policy", f"{policy.name} (index {policy.index})", target=target)]


def evaluate_tokens(router: object, engine: object, engine_url: str, *, target: str = "") -> CheckResult:
    """Whether the router counts a probe prompt as the engine does (its ``/tokenize``): length buckets,
    the PD threshold and the precise index all rest on it."""
    if not isinstance(router, dict) or not isinstance(router.get("count"), int):
        return skipped(G, "tokens", "the router has no /tokenize (an older infctl)", target=target)
    name, count = str(router.get("tokenizer", "?")), int(router["count"])
    theirs = engine.get("count") if isinstance(engine, dict) else None
    if not isinstance(theirs, int):
        return skipped(
            G,
            "tokens",
            f"router counts by {name}; {engine_url or 'no engine'} has no /tokenize",
            target=target,
        )
    fix = "start the router with --tokenizer MODEL_DIR_OR_ID (router file: tokenizer), the engines' model"
    if count == theirs:
        return passed(
            G, "tokens", f"router ({name}) and engine count the probe alike: {count}", target=target
        )
    if not router.get("exact"):
        return warned(
            G, "tokens", f"router counts by {name} ({count}); the engine counts {theirs}", fix, target=target
        )
    return failed(
        G,
        "tokens",
        f"router's tokenizer {name} counts {count}; the engine counts {theirs}",
        fix,
        target=target,
    )
