"""Template contexts for the router, autoscaler, traffic and monitoring objects (plain data, no I/O)."""

from __future__ import annotations

import hashlib
import math
from typing import Any

import yaml

from infctl.config import DeploymentProfile
from infctl.errors import ConfigError
from infctl.manifests import labels as L
from infctl.manifests.admin_secret import ADMIN_TOKEN_ENV, TOKEN_KEY, default_secret_name
from infctl.manifests.daemons import autoscaler_file, router_file
from infctl.manifests.engine import ENGINE_PORT
from infctl.manifests.group_set import relabelings
from infctl.manifests.observability import alert_rules, dashboards
from infctl.manifests.options import RenderOptions
from infctl.manifests.placement import PlacementPlan
from infctl.manifests.route_timeouts import gke_backend_timeout, route_timeouts

EPP_PORT = 9002
"""gRPC port of a Gateway API Inference Extension endpoint picker."""


def config_hash(text: str) -> str:
    """Pod annotation that rolls the pods when their config file changes."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _dump(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, width=10_000)


def router_context(
    profile: DeploymentProfile, plan: PlacementPlan, namespace: str, opts: RenderOptions
) -> dict[str, Any]:
    name = f"{profile.name}-router"
    file = router_file(profile, plan, namespace)
    return {
        "name": name,
        "labels": L.release_labels(profile.name, "router", "infctl-router"),
        "selector": {L.RELEASE: profile.name, L.COMPONENT: "router"},
        "file": file,
        "config_hash": config_hash(_dump(file)),
        "image": profile.router.image or opts.image,
        "port": profile.router.port,
        "replicas": profile.router.replicas,
        "admin_token": admin_token_context(profile, opts),
        # preStop's 5 s (the template's hook), the router's drain, 10 s for its exit.
        "grace_period_s": 5 + math.ceil(file["drain_timeout_s"]) + 10,
    }


def admin_token_context(profile: DeploymentProfile, opts: RenderOptions) -> dict[str, str] | None:
    """The env var and Secret key the router's admin token comes from; None when there is no router
    (the autoscaler then needs no token)."""
    if not profile.router.enabled:
        return None
    secret = opts.admin_token_secret or default_secret_name(profile.name)
    return {"env": ADMIN_TOKEN_ENV, "secret": secret, "key": TOKEN_KEY}


def autoscaler_context(
    profile: DeploymentProfile, plan: PlacementPlan, namespace: str, opts: RenderOptions
) -> dict[str, Any]:
    file = autoscaler_file(profile, plan, namespace)
    rules: dict[tuple[str, str], list[str]] = {}
    for t in file["targets"]:
        group, resource = (
            ("leaderworkerset.x-k8s.io", "leaderworkersets")
            if t["kind"] == "LeaderWorkerSet"
            else ("apps", "deployments")
        )
        rules.setdefault((group, resource), []).append(t["name"])
    return {
        "name": f"{profile.name}-autoscaler",
        "labels": L.release_labels(profile.name, "autoscaler", "infctl-autoscaler"),
        "selector": {L.RELEASE: profile.name, L.COMPONENT: "autoscaler"},
        "file": file,
        "config_hash": config_hash(_dump(file)),
        "image": profile.router.image or opts.image,
        "rules": [{"group": g, "resource": r, "names": n} for (g, r), n in sorted(rules.items())],
        "port": file["port"],  # /metrics and /health, named ``metrics`` (its Service and ServiceMonitor)
        "memory": file["memory_configmap"],
        # It reads per-engine signals from the router's admin API (GET /admin/backends).
        "admin_token": admin_token_context(profile, opts),
    }


def traffic_context(profile: DeploymentProfile, namespace: str, opts: RenderOptions) -> dict[str, Any]:
    gw_ns, _, gw_name = opts.gateway.rpartition("/")
    parent: dict[str, Any] = {"name": gw_name, **({"namespace": gw_ns} if gw_ns else {})}
    weight = opts.weight if opts.weight is not None else (0 if opts.old_backend else 100)
    if not 0 <= weight <= 100:
        raise ConfigError(f"--weight: expected a percentage 0..100, found {weight}")
    pool = None
    if opts.inference_pool_epp is not None:
        gang = profile.cluster.gang if profile.cluster is not None else None
        if profile.mode == "group" and gang is not None and gang.one_set_per_group:
            raise ConfigError(
                f"--inference-pool-epp: with gang scheduler {gang.scheduler} one pod template serves a "
                "whole PD group, so no role label tells an InferencePool's decode engines apart",
                hint="send traffic to infctl's router (drop --inference-pool-epp): it reads each pod's role",
            )
        role = "both" if profile.mode == "aggregated" else "decode"
        pool = {
            "name": f"{profile.name}-pool",
            "match_labels": {L.RELEASE: profile.name, L.ROLE: role},
            "port": ENGINE_PORT,
            "epp": opts.inference_pool_epp,
            "epp_port": EPP_PORT,
        }
        new: dict[str, Any] = {
            "group": "inference.networking.k8s.io",
            "kind": "InferencePool",
            "name": pool["name"],
            "weight": weight,
        }
    elif profile.router.enabled:
        new = {"name": f"{profile.name}-router", "port": profile.router.port, "weight": weight}
    else:
        raise ConfigError(
            "traffic needs the router or an InferencePool in front of the engines",
            hint="enable router, pass --inference-pool-epp SERVICE, or --no-traffic",
        )
    old = _old_ref(opts.old_backend) if opts.old_backend is not None else None
    refs = [new] if old is None else [new, {**old, "weight": 100 - weight}]
    return {
        "name": profile.name,
        "labels": L.release_labels(profile.name, "traffic", "infctl-traffic"),
        "parent_refs": [parent],
        "backend_refs": refs,
        "timeouts": route_timeouts(profile, via_router=pool is None),
        "gke_policies": _gke_policies(profile, namespace, new, old, via_router=pool is None),
        "pool": pool,
    }


def _gke_policies(
    profile: DeploymentProfile,
    namespace: str,
    new: dict[str, Any],
    old: dict[str, Any] | None,
    *,
    via_router: bool,
) -> list[dict[str, Any]]:
    """On GKE, a backend timeout for every backend the rule sends to, as ``timeouts`` bound the whole rule
    elsewhere: the new system's (policy ``<release>``) and, in a cutover, the old system's Service
    (``<release>-old-backend``), whose 30 s default cut long answers on the old path. A GCPBackendPolicy
    must live in its Service's namespace (GKE's "Configure Gateway resources using Policies"), so an old
    Service in another namespace gets none here: its owner adds it (docs/gateway.md)."""
    targets = [(profile.name, new)]
    if old is not None and old.get("namespace", namespace) == namespace:
        targets.append((f"{profile.name}-old-backend", old))
    policies = [(name, gke_backend_timeout(profile, _target_ref(ref), via_router)) for name, ref in targets]
    return [{"name": name, **policy} for name, policy in policies if policy is not None]


def _target_ref(ref: dict[str, Any]) -> dict[str, str]:
    """A backendRef as a policy's ``targetRef`` (a Service when it names no kind)."""
    return {"group": ref.get("group", ""), "kind": ref.get("kind", "Service"), "name": ref["name"]}


def _old_ref(spec: str) -> dict[str, Any]:
    ns, _, rest = spec.rpartition("/")
    name, sep, port = rest.partition(":")
    if not sep or not port.isdigit() or not name:
        raise ConfigError(
            f"--old-backend {spec!r}: expected [namespace/]service:port",
            hint="e.g. --old-backend legacy/llm-gateway:80",
        )
    return {"name": name, "port": int(port), **({"namespace": ns} if ns else {})}


def monitoring_context(
    profile: DeploymentProfile,
    namespace: str,
    opts: RenderOptions,
    plan: PlacementPlan | None = None,
    autoscaler: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The monitoring objects, labelled for the cluster's Prometheus Operator and Grafana sidecar; ``plan``'s
    PD-group sets get relabelings that give their series a role and group (``group_set.relabelings``);
    ``autoscaler`` (the rendered autoscaler.yaml, None: no autoscaler rendered) gets a ServiceMonitor and
    its alerts."""
    own = L.release_labels(profile.name, "monitoring", "infctl-monitoring")
    selected = profile.cluster.monitoring if profile.cluster is not None else None
    prometheus = dict(selected.prometheus_labels) if selected is not None else {}
    grafana = dict(selected.dashboard_labels) if selected is not None else {"grafana_dashboard": "1"}
    return {
        "name": profile.name,
        "labels": {**own, **prometheus},
        "engine_selector": {L.RELEASE: profile.name, L.COMPONENT: "engine"},
        "pod_target_labels": [L.ROLE, L.GROUP, L.POOL, L.WORKLOAD],
        "relabelings": relabelings(plan) if plan is not None else [],
        "router": profile.router.enabled,
        "router_selector": {L.RELEASE: profile.name, L.COMPONENT: "router"},
        "autoscaler": autoscaler is not None,
        "autoscaler_selector": {L.RELEASE: profile.name, L.COMPONENT: "autoscaler"},
        "rule_groups": alert_rules(profile, namespace, opts.ttft_slo_s, autoscaler),
        "dashboards": dashboards(profile, namespace),
        "dashboard_labels": {**own, **grafana},
    }
