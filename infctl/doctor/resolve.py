"""Turning what the operator named (URLs, a profile, a local release) into engine and router targets.

``--engine-url URL[,key=value...]`` takes the keys of :class:`EngineTarget` (``engine``, ``model``, ``role``,
``kv_events``); a profile fills in what a spec leaves out (engine, served model name, prefix caching, KV-event
port, whether the router's index is precise). A local release contributes its engines and router from the
plan and state files its supervisor wrote, and the router's admin token from the release's token file
unless the operator exported one.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from infctl.config import DeploymentProfile
from infctl.config.router import check_engine_url, parse_url_spec
from infctl.doctor.targets import DoctorRequest, EngineTarget, RouterTarget
from infctl.engines import get_adapter
from infctl.errors import ConfigError
from infctl.local.admin_token import token_path
from infctl.local.deploy import read_plan
from infctl.local.paths import resolve_run_dir
from infctl.local.procs import pid_alive
from infctl.local.spec import LocalPlan
from infctl.local.state import PLAN_FILE, is_live, read_state
from infctl.router.policies import build_policy

SPEC_KEYS = ("engine", "model", "role", "kv_events", "dp")
ROLES = ("prefill", "decode", "both")
Alive = Callable[[int, int | None], bool]


def parse_engine_spec(spec: str) -> dict[str, str]:
    """``URL[,key=value...]`` -> ``{"url": URL, key: value}``; ConfigError naming the bad part."""
    out = parse_url_spec(spec, flag="--engine-url", keys=SPEC_KEYS)
    try:
        # The one rule; the CLI's flag has already applied it (cli.flags.check_url).
        check_engine_url(out["url"])
    except ValueError as exc:
        raise ConfigError(
            f"--engine-url {spec}: {exc}", hint="e.g. --engine-url http://10.0.0.7:8000,engine=sglang"
        ) from None
    if "engine" in out:
        get_adapter(out["engine"])  # ConfigError listing the known engines
    if "dp" in out and not (out["dp"].isdigit() and int(out["dp"]) >= 1):
        raise ConfigError(f"--engine-url {spec}: dp must be a count of ranks, found {out['dp']!r}")
    if out.get("role", "both") not in ROLES:
        roles = ", ".join(ROLES)
        raise ConfigError(f"--engine-url {spec}: role must be one of {roles}, found {out['role']!r}")
    return out


def profile_precise(profile: DeploymentProfile) -> bool:
    """Whether the profile's router builds its prefix index from KV events."""
    try:
        return profile.router.enabled and build_policy(profile.router.policy).index == "precise"
    except ConfigError:
        return False  # the router group reports the bad policy


def engine_target(spec: Mapping[str, str], profile: DeploymentProfile | None = None) -> EngineTarget:
    """An engine target from a parsed spec, with the profile's expectations where the spec is silent."""
    fields: dict[str, Any] = {k: v for k, v in spec.items() if k in ("url", *SPEC_KEYS) and k != "dp"}
    if "dp" in spec:
        fields["data_parallel_size"] = int(spec["dp"])
    if profile is not None:
        model = profile.model
        fields.setdefault("engine", model.engine)
        fields.setdefault("model", model.served_model_name)
        fields["prefix_caching"] = model.enable_prefix_caching
        fields["precise"] = profile_precise(profile)
        fields.setdefault("data_parallel_size", model.data_parallel_size)
        if model.kv_events is not None and model.kv_events.enabled:
            fields.setdefault("kv_events", f"tcp://{urlsplit(spec['url']).hostname}:{model.kv_events.port}")
    return EngineTarget(**fields)


def _flag(argv: Sequence[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv and argv.index(name) + 1 < len(argv) else None


def local_targets(
    plan: LocalPlan, profile: DeploymentProfile | None = None
) -> tuple[list[EngineTarget], RouterTarget | None]:
    """Engines and router of a local release's plan, with what the plan says about them."""
    routers = [s for s in plan.specs if s.kind == "router"]
    router_argv = routers[0].argv if routers else ()
    precise = _precise(_flag(router_argv, "--policy"))
    engines = []
    for s in plan.specs:
        if s.kind != "engine":
            continue
        spec = {"url": s.url, "role": s.role or "both", "model": plan.model}
        engine = _flag(router_argv, "--engine")
        if engine is not None:
            spec["engine"] = engine
        if "kv_events" in s.ports:
            spec["kv_events"] = f"tcp://{urlsplit(s.url).hostname}:{s.ports['kv_events']}"
        target = engine_target(spec, profile)
        engines.append(
            replace(target, precise=precise or target.precise, data_parallel_size=s.data_parallel_size)
        )
    return engines, RouterTarget(routers[0].url) if routers else None


def _precise(policy: str | None) -> bool:
    """Whether a router ``--policy`` value (a preset or a JSON policy) uses the precise index."""
    if policy is None:
        return False
    try:
        config = json.loads(policy) if policy.lstrip().startswith("{") else policy
        return build_policy(config).index == "precise"
    except (ConfigError, ValueError):
        return False


def local_admin_token(run_dir: Path, plan: LocalPlan) -> str | None:
    """The token the supervisor of ``plan`` (found under ``run_dir``, which may be spelt differently from
    the plan's own) generated for its router, or None when there is no readable token file (the router
    check then reports that the admin API refused doctor)."""
    try:
        return token_path(replace(plan, run_dir=run_dir)).read_text().strip() or None
    except OSError:
        return None


def read_local_plan(run_dir: Path, release: str) -> LocalPlan | None:
    """The plan a local release was started from, or None when it has none on disk."""
    path = run_dir / release / PLAN_FILE
    return read_plan(path)[0] if path.is_file() else None


def build_request(
    *,
    profile: DeploymentProfile | None = None,
    engines: Sequence[str] = (),
    router: str | None = None,
    autoscaler: str | None = None,
    cluster: bool = False,
    local: str | None = None,
    run_dir: Path | None = None,
    namespace: str | None = None,
    admin_token: str | None = None,
    alive: Alive = pid_alive,
) -> DoctorRequest:
    """Everything to check, from the CLI's options; ConfigError (exit 2) for nothing to check or bad specs."""
    if profile is None and not (engines or router or autoscaler or cluster or local):
        raise ConfigError(
            "nothing to check",
            hint="give -f PROFILE, --engine-url URL, --router URL, --autoscaler URL, --local "
            "RELEASE or --cluster (see infctl doctor --help)",
        )
    targets = [engine_target(parse_engine_spec(s), profile) for s in engines]
    router_target = RouterTarget(router, admin_token) if router else None
    release = local or (profile.name if profile is not None and profile.target == "local" else None)
    directory = None  # resolved (a file there refused) for a local release only: no other check reads it
    if release is not None:
        directory = resolve_run_dir(run_dir, profile.local.run_dir if profile is not None else None)
        state = read_state(directory, release)
        plan = read_local_plan(directory, release) if state and is_live(state, alive=alive) else None
        if plan is not None:
            local_engines, local_router = local_targets(plan, profile)
            targets += [t for t in local_engines if t.url not in {e.url for e in targets}]
            token = admin_token or local_admin_token(directory, plan)
            router_target = router_target or (RouterTarget(local_router.url, token) if local_router else None)
            autoscaler = autoscaler or next((s.url for s in plan.specs if s.kind == "autoscaler"), None)
    return DoctorRequest(
        profile=profile,
        engines=tuple(targets),
        router=router_target,
        autoscaler=autoscaler,
        cluster=cluster,
        namespace=namespace,
        local_release=local,
        run_dir=directory,
    )
