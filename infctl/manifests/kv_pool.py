"""The KV pool's servers as Kubernetes objects, and the engines' view of where the pool is.

What to run comes from :func:`infctl.engines.kv_pool.servers`; this module adds names, labels, resources and
placement. A rendered pool's Services are named ``<release>-kv-master`` (Mooncake) or ``<release>-kv-server``
(LMCache); :func:`with_pool_address` writes their DNS names into the profile's ``kv_offload.pool`` so the
engine adapters emit the same variables for a rendered pool as for a running one.
"""

from __future__ import annotations

from typing import Any

from infctl.config import DeploymentProfile
from infctl.engines import get_adapter
from infctl.engines import kv_pool as pools
from infctl.engines.cmdline import number_arg
from infctl.manifests import labels as L

COMPONENT = "kv-pool"
"""``app.kubernetes.io/component`` of every pool object."""


def service_host(profile: DeploymentProfile, component: str, namespace: str) -> str:
    return f"{profile.name}-{component}.{namespace}.svc"


def with_pool_address(profile: DeploymentProfile, namespace: str) -> DeploymentProfile:
    """``profile`` with a rendered pool's address (and Mooncake metadata URL) filled in, else unchanged."""
    model = profile.model
    off = model.kv_offload
    if pools.pool_kind(model) is None or off is None or off.pool is None or off.pool.servers is None:
        return profile
    hosts = {c: service_host(profile, c, namespace) for c in ("kv-master", "kv-server")}
    address, metadata = pools.rendered_endpoints(model, hosts)
    pool = off.pool.model_copy(update={"address": address, "metadata_server": metadata})
    model = model.model_copy(update={"kv_offload": off.model_copy(update={"pool": pool})})
    return profile.model_copy(update={"model": model})


def pool_values(profile: DeploymentProfile, namespace: str) -> list[dict[str, Any]]:
    """One entry per pool server Deployment (with its Service when it has one); empty with none to render."""
    model = profile.model
    servers = pools.servers(model, service_host(profile, "kv-master", namespace))
    if not servers:
        return []
    off = model.kv_offload
    assert off is not None and off.pool is not None and off.pool.servers is not None
    image = off.pool.servers.image or model.image or get_adapter(model.engine).default_image
    cluster = profile.cluster
    out = []
    for s in servers:
        name = f"{profile.name}-{s.component}"
        selector = {L.RELEASE: profile.name, L.COMPONENT: COMPONENT, L.WORKLOAD: s.component}
        labels = {
            **L.release_labels(profile.name, COMPONENT, f"infctl-{s.component}"),
            L.WORKLOAD: s.component,
        }
        pod_ip = {"valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}
        env: list[dict[str, Any]] = [{"name": n, **pod_ip} for n in s.pod_ip_env]
        env += [{"name": k, "value": v} for k, v in sorted(s.env.items())]
        memory = f"{number_arg(s.memory_gib)}Gi"
        resources: dict[str, Any] = {
            "requests": {"cpu": number_arg(s.cpu), "memory": memory},
            "limits": {"memory": memory},
        }
        rdma = s.rdma and cluster is not None and cluster.rdma_resource is not None
        if rdma and cluster is not None and cluster.rdma_resource is not None:
            resources["limits"][cluster.rdma_resource] = cluster.rdma_per_pod
        out.append(
            {
                "name": name,
                "labels": labels,
                "selector": selector,
                "replicas": s.replicas,
                "image": image,
                "command": s.command,
                "env": env,
                "ports": [{"name": n, "containerPort": p} for n, p in s.ports.items()],
                "probe_port": next(iter(s.ports)),
                "resources": resources,
                "rdma": rdma,
                "service": s.service,
                "node_selector": dict(cluster.node_selector) if cluster is not None else {},
                "tolerations": [t.model_dump(exclude_none=True) for t in cluster.tolerations]
                if cluster is not None
                else [],
            }
        )
    return out
