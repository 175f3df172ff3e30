"""The files the router and autoscaler pods read (``/etc/infctl/*.yaml``), as plain data.

The router file is validated with the router's own model (:class:`infctl.config.RouterFile`) so a rendered
ConfigMap always loads. The router finds engines by Kubernetes discovery: ready pods of this release that
serve HTTP (role, group, pool and engine read from their labels), so scaling needs no new file.
"""

from __future__ import annotations

from typing import Any

from infctl.config import DeploymentProfile, RouterFile
from infctl.config.autoscaler import METRICS_PORT, AutoscalerFile
from infctl.config.scale_to_zero import hold_when_empty_s, zero_window
from infctl.engines.cmdline import trusts_request_chat_template
from infctl.manifests import labels as L
from infctl.manifests.admin_secret import ADMIN_TOKEN_ENV
from infctl.manifests.engine import ENGINE_PORT
from infctl.manifests.keda import keda_workloads
from infctl.manifests.placement import PlacementPlan, bounds_of
from infctl.manifests.route_timeouts import longest_request_s

CONFIG_DIR = "/etc/infctl"


def router_file(profile: DeploymentProfile, plan: PlacementPlan, namespace: str) -> dict[str, Any]:
    """Contents of ``router.yaml``: engines found by Kubernetes discovery of this release's serving pods."""
    policy = profile.router_policy()  # with length pools, one bucket per pool (pods labelled with it)
    selector = f"{L.RELEASE}={profile.name},{L.COMPONENT}=engine,{L.SERVES}=http"
    data: dict[str, Any] = {
        "discovery": {"namespace": namespace, "selector": selector, "port": ENGINE_PORT},
        "policy": policy,
        "host": "0.0.0.0",
        "port": profile.router.port,
        "engine": profile.model.engine,
        # The model's own tokenizer, downloaded at start-up into the pod's Hugging Face cache (an id), or
        # read from a path the operator mounted: exact counts and block hashes, as the engines see them.
        "tokenizer": profile.model.tokenizer or profile.model.model,
        "pd_mode": "pool" if profile.mode == "pool" else "group",
        "admin_token_env": ADMIN_TOKEN_ENV,
        # A stopping router pod (rollout, node drain) lets its streams finish: as long as the Gateway lets
        # one run (the router's own default, 30 s, cut every longer answer at each router rollout).
        "drain_timeout_s": longest_request_s(profile, via_router=True),
    }
    hold = hold_when_empty_s(profile)
    if hold is not None:  # scale-to-zero: hold the request that wakes replicas at 0 while one starts
        data["hold_when_empty_s"] = hold
    if trusts_request_chat_template(profile.model):  # the router renders what its engines will
        data["trust_request_chat_template"] = True
    RouterFile.model_validate(data)
    return data


def autoscaler_file(profile: DeploymentProfile, plan: PlacementPlan, namespace: str) -> dict[str, Any]:
    """Contents of ``autoscaler.yaml``: the scale targets of this release and the profile's thresholds."""
    scaler = profile.autoscaler
    targets = []
    replicas = {r.workload: r for r in profile.engine_replicas()}
    keda = {w.name for w in keda_workloads(profile, plan)}  # KEDA's ScaledObjects scale these
    for w in plan.workloads:
        spec = replicas.get(w.workload)  # none for a PD-group set, which is never autoscaled
        bounds = bounds_of(profile, spec) if spec is not None else None
        if bounds is None or w.name in keda:
            continue
        target: dict[str, Any] = {
            "kind": "LeaderWorkerSet" if w.multi_node else "Deployment",
            "name": w.name,
            "role": w.role,
            "min": bounds.min,
            "max": bounds.max,
        }
        if w.group is not None:
            target["group"] = w.group
        if w.length_pool is not None:
            target["pool"] = w.length_pool  # only this pool's engines count toward its load
        zero = zero_window(profile, w.length_pool, w.role)
        if zero is not None:
            target["scale_to_zero_after_s"] = zero.after_s
        targets.append(target)
    router = f"http://{profile.name}-router.{namespace}.svc:{profile.router.port}"
    data = {
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
        # A scale-in waits this long for the requests of the pods it removes (infctl.autoscaler.kube_drain).
        "drain_timeout_s": profile.drain.timeout_s,
        # Its memory between restarts (cooldowns, a warm forecast): rendered empty, read and patched by it.
        "memory_configmap": f"{profile.name}-autoscaler-memory",
        # /metrics and /health (read-only) on the pod's address, for Prometheus and the kubelet's probes.
        "host": "0.0.0.0",
        "port": METRICS_PORT,
    }
    hold = hold_when_empty_s(profile)
    if hold is not None:  # start-ups of targets that may go to 0 are checked against the router's hold
        data["hold_when_empty_s"] = hold
    if targets:  # a release with nothing to autoscale renders no autoscaler
        AutoscalerFile.model_validate(data)  # what the daemon will read, checked by its own model
    return data
