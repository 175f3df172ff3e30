"""The values an engine pod template is rendered from: image, argv, env, ports, resources, probes, volumes.

Arguments come from the engine adapter (``launch_command``/``launch_env``); this module only adds what
Kubernetes needs around them. Templates lay the values out (``templates/_engine_pod.yaml.j2``).
"""

from __future__ import annotations

import shlex
from typing import Any

from infctl.config import DeploymentProfile
from infctl.engines import DIST_PORT, get_adapter
from infctl.engines.versions import check_image
from infctl.manifests import labels as L
from infctl.manifests.drain import lifecycle
from infctl.manifests.gang import pod_group_of
from infctl.manifests.placement import WorkloadPlan

ENGINE_PORT = 8000
"""Port every engine's HTTP server listens on inside its pod."""
STARTUP_BUDGET_S = 3600
"""How long a pod may take to load weights before the startup probe gives up (large MoE models: minutes)."""


def engine_values(profile: DeploymentProfile, plan: WorkloadPlan, *, leader: bool = True) -> dict[str, Any]:
    """The engine container of `plan`'s pods; `leader=False` for workers of a multi-node replica."""
    model = profile.model
    adapter = get_adapter(model.engine)
    argv = [_pod_ip(a) for a in adapter.launch_command(model, role=plan.role, port=ENGINE_PORT)]
    shell_suffix = ""
    if plan.multi_node:
        assert profile.cluster is not None
        extra = adapter.multinode_args(
            model, nodes=plan.nodes_per_replica, gpus_per_node=profile.cluster.gpus_per_node, leader=leader
        )
        argv += extra.args
        shell_suffix = extra.shell_suffix
    command = (
        ["/bin/sh", "-c", "exec " + " ".join(shlex.quote(a) for a in argv) + " " + shell_suffix]
        if shell_suffix
        else argv
    )
    image = model.image or adapter.default_image
    check_image(adapter, image, argv)
    pod_ip = {"valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}
    # POD_IP for $(POD_IP) in argv, then the variables the engine advertises its own address in.
    env = [{"name": name, **pod_ip} for name in ("POD_IP", *adapter.pod_ip_env(model, plan.role))]
    cluster = profile.cluster
    storage = cluster.storage if cluster is not None else None
    if storage is not None and (storage.host_path or storage.pvc):
        env.append({"name": "HF_HOME", "value": storage.mount_path})
    env += [{"name": k, "value": v} for k, v in sorted(adapter.launch_env(model, plan.role).items())]
    gang = pod_group_of(profile, plan)  # a gang scheduler's PodGroup, when one holds the PD group
    return {
        "pod_labels": {
            **plan.pod_labels,
            **({L.SERVES: "http"} if leader else {}),
            **(gang.labels if gang else {}),
        },
        "pod_annotations": gang.annotations if gang else {},
        "scheduler_name": gang.scheduler_name if gang else None,
        "image": image,
        "command": command,
        "env": env,
        "ports": _ports(profile, plan) if leader else [{"name": "dist", "containerPort": DIST_PORT}],
        "resources": _resources(profile, plan),
        "probes": _probes(adapter.health.path) if leader else None,
        "volumes": _volumes(profile),
        "rdma": cluster is not None and cluster.rdma_resource is not None,
        # Stop without cutting requests: wait for the engine (a worker: its leader) to be idle.
        "lifecycle": lifecycle(profile, ENGINE_PORT, leader=leader),
        "grace_period_s": profile.drain.grace_period_s,
    }


def _pod_ip(arg: str) -> str:
    # The adapters leave $POD_IP for the runner; Kubernetes expands $(POD_IP) from the env below.
    return arg.replace("$POD_IP", "$(POD_IP)")


def _ports(profile: DeploymentProfile, plan: WorkloadPlan) -> list[dict[str, Any]]:
    model = profile.model
    ports: list[dict[str, Any]] = [{"name": "http", "containerPort": ENGINE_PORT}]
    if model.kv_events is not None and model.kv_events.enabled:
        ports.append({"name": "kv-events", "containerPort": model.kv_events.port})
    # Parallel-style PD meets at a bootstrap server on each prefill engine.
    if plan.role == "prefill" and model.pd is not None and get_adapter(model.engine).pd_style == "parallel":
        ports.append({"name": "bootstrap", "containerPort": model.pd.bootstrap_port})
    if plan.multi_node:
        ports.append({"name": "dist", "containerPort": DIST_PORT})
    return ports


def _resources(profile: DeploymentProfile, plan: WorkloadPlan) -> dict[str, Any]:
    cluster = profile.cluster
    if cluster is None:
        return {}
    limits: dict[str, Any] = {cluster.gpu_resource: plan.gpus_per_pod}
    if cluster.rdma_resource is not None:
        limits[cluster.rdma_resource] = cluster.rdma_per_pod
    return {"limits": limits}


def _probes(path: str) -> dict[str, Any]:
    http = {"path": path, "port": "http"}
    return {
        "startupProbe": {"httpGet": http, "periodSeconds": 10, "failureThreshold": STARTUP_BUDGET_S // 10},
        "readinessProbe": {"httpGet": http, "periodSeconds": 5, "timeoutSeconds": 2, "failureThreshold": 3},
        "livenessProbe": {"httpGet": http, "periodSeconds": 10, "timeoutSeconds": 5, "failureThreshold": 6},
    }


def _volumes(profile: DeploymentProfile) -> list[dict[str, Any]]:
    """(volume, mount) pairs: shared memory for NCCL and the model cache when the cluster names one."""
    pairs: list[dict[str, Any]] = [
        {
            "volume": {"name": "dshm", "emptyDir": {"medium": "Memory"}},
            "mount": {"name": "dshm", "mountPath": "/dev/shm"},
        }
    ]
    storage = profile.cluster.storage if profile.cluster is not None else None
    if storage is not None and (storage.host_path or storage.pvc):
        source: dict[str, Any] = (
            {"hostPath": {"path": storage.host_path, "type": "Directory"}}
            if storage.host_path
            else {"persistentVolumeClaim": {"claimName": storage.pvc, "readOnly": True}}
        )
        pairs.append(
            {
                "volume": {"name": "model-cache", **source},
                "mount": {
                    "name": "model-cache",
                    "mountPath": storage.mount_path,
                    "readOnly": bool(storage.pvc),
                },
            }
        )
    return pairs + _kv_disk(profile)


def _kv_disk(profile: DeploymentProfile) -> list[dict[str, Any]]:
    """The KV disk tier's volume (``model.kv_offload.disk``), writable, at the path the engine is told."""
    off = profile.model.kv_offload
    disk = off.disk if off is not None else None
    if disk is None:
        return []
    source: dict[str, Any] = (
        {"hostPath": {"path": disk.host_path, "type": "DirectoryOrCreate"}}
        if disk.host_path
        else {"persistentVolumeClaim": {"claimName": disk.pvc}}
    )
    return [
        {
            "volume": {"name": "kv-disk", **source},
            "mount": {"name": "kv-disk", "mountPath": disk.mount_path},
        }
    ]
