"""The files the router and autoscaler pods read (``/etc/infctl/*.yaml``), as plain data.

The router file is validated with the router's own model (:class:`infctl.config.RouterFile`) so a rendered
ConfigMap always loads. Until the router discovers engines through the Kubernetes API, it gets a static
list: one backend per leader pod for multi-node replicas (stable LeaderWorkerSet DNS names) and one per
workload for Deployments (the workload's headless Service name).
"""

from __future__ import annotations

from typing import Any

from infctl.config import DeploymentProfile, RouterFile
from infctl.manifests import labels as L
from infctl.manifests.engine import ENGINE_PORT
from infctl.manifests.placement import PlacementPlan

CONFIG_DIR = "/etc/infctl"
ADMIN_TOKEN_ENV = "INFCTL_ROUTER_ADMIN_TOKEN"


def router_file(profile: DeploymentProfile, plan: PlacementPlan, namespace: str) -> dict[str, Any]:
    """Contents of ``router.yaml`` for ``profile``'s router."""
    backends: list[dict[str, Any]] = []
    for w in plan.workloads:
        hosts = (
            [f"{w.name}-{i}.{w.name}.{namespace}.svc" for i in range(w.replicas)]
            if w.multi_node
            else [f"{w.name}.{namespace}.svc"]
        )
        for host in hosts:
            entry: dict[str, Any] = {"url": f"http://{host}:{ENGINE_PORT}", "role": w.role}
            if w.group is not None:
                entry["group"] = L.group_value(w.group)
            if w.pool is not None:
                entry["pool"] = w.pool
            backends.append(entry)
    settings = profile.router.settings
    policy: str | dict[str, Any] = (
        {"preset": profile.router.policy, "settings": settings} if settings else profile.router.policy
    )
    data: dict[str, Any] = {
        "backends": backends,
        "policy": policy,
        "host": "0.0.0.0",
        "port": profile.router.port,
        "engine": profile.model.engine,
        "pd_mode": "pool" if profile.mode == "pool" else "group",
        "admin_token_env": ADMIN_TOKEN_ENV,
    }
    RouterFile.model_validate(data)
    return data


def autoscaler_file(profile: DeploymentProfile, plan: PlacementPlan, namespace: str) -> dict[str, Any]:
    """Contents of ``autoscaler.yaml``: the scale targets of this release and the profile's thresholds."""
    scaler = profile.autoscaler
    targets = []
    for w in plan.workloads:
        bounds = getattr(scaler, w.role)
        if bounds is None:
            continue
        target: dict[str, Any] = {
            "kind": "LeaderWorkerSet" if w.multi_node else "Deployment",
            "name": w.name,
            "role": w.role,
            "min": bounds.min,
            "max": bounds.max,
        }
        if w.group is not None:
            target["group"] = L.group_value(w.group)
        targets.append(target)
    router = f"http://{profile.name}-router.{namespace}.svc:{profile.router.port}"
    return {
        "release": profile.name,
        "namespace": namespace,
        "engine": profile.model.engine,
        "router_url": router if profile.router.enabled else None,
        "selector": {L.RELEASE: profile.name, L.COMPONENT: "engine"},
        "targets": targets,
        "queue_per_replica": scaler.queue_per_replica.model_dump(),
        "kv_usage": scaler.kv_usage.model_dump(),
        "interval_s": scaler.interval_s,
        "dry_run": scaler.dry_run,
    }
