"""KEDA ScaledObjects for engine workloads whose profile section says ``scale_to_zero.scaler: keda`` (pure).

One ScaledObject per such workload, ``minReplicaCount: 0`` and the section's ``max``, ``cooldownPeriod``
the idle window (``after_s``), polled every ``autoscaler.interval_s``. Three prometheus triggers, the first
two against ``autoscaler.queue_per_replica.up`` requests per replica (the HPA's ``AverageValue``):

- **held**: the requests the router holds for the workload's pool (``infctl_router_pool_queue_depth``, or
  ``infctl_router_queue_depth`` without length pools). At 0 replicas this is the only demand there is, and
  any held request (``activationThreshold`` 0) wakes the workload;
- **waiting**: the requests its engines have waiting (the engine's waiting gauges counted as its adapter
  counts them, :func:`infctl.engines.promql.waiting_series`, on the pod labels the PodMonitor copies), what
  KEDA's vLLM examples scale on;
- **running**: the requests its engines are serving, for activation only (its threshold, ``ACTIVE_ONLY``,
  sizes nothing). KEDA counts ``cooldownPeriod`` from the last moment a trigger was active: under light
  load nothing waits anywhere, so without it a workload serving requests would go to 0 under them, where
  ``after_s`` means no request held, waiting *or running*, as infctl's autoscaler reads it.

All three are read from the Prometheus that scrapes the release through the ServiceMonitor and PodMonitor
``infctl render`` writes, by their ``job`` (:func:`infctl.manifests.observability.selectors`).
"""

from __future__ import annotations

from typing import Any

from infctl.config import DeploymentProfile
from infctl.config.scale_to_zero import zero_window
from infctl.engines import get_adapter
from infctl.engines.promql import running_series, waiting_series
from infctl.manifests import labels as L
from infctl.manifests.observability import selectors
from infctl.manifests.placement import PlacementPlan, WorkloadPlan, bounds_of

API_VERSION = "keda.sh/v1alpha1"
ROUTER_QUEUE = "infctl_router_queue_depth"
ROUTER_POOL_QUEUE = "infctl_router_pool_queue_depth"
ACTIVE_ONLY = "1000000"
"""The running trigger's threshold: per replica, above any engine's batch, so the HPA's replicas from it
(total / threshold, rounded up) are at most 1 and the other triggers size the workload."""


def keda_workloads(profile: DeploymentProfile, plan: PlacementPlan) -> list[WorkloadPlan]:
    """The workloads KEDA scales (their section's ``scale_to_zero.scaler`` is ``keda``)."""
    if not profile.autoscaler.enabled:
        return []
    out = []
    for w in plan.workloads:
        stz = zero_window(profile, w.length_pool, w.role)
        if stz is not None and stz.scaler == "keda" and w.members is None:
            out.append(w)
    return out


def scaled_objects(profile: DeploymentProfile, plan: PlacementPlan, namespace: str) -> list[dict[str, Any]]:
    """A ScaledObject for every workload KEDA scales."""
    engines, router = selectors(profile, namespace)
    metrics = get_adapter(profile.model.engine).signal_metrics
    target = f"{profile.autoscaler.queue_per_replica.up:g}"
    objects = []
    for w in keda_workloads(profile, plan):
        stz = zero_window(profile, w.length_pool, w.role)
        bounds = bounds_of(profile, next(r for r in profile.engine_replicas() if r.workload == w.workload))
        assert stz is not None and stz.prometheus is not None and bounds is not None
        held = (
            f'sum({ROUTER_POOL_QUEUE}{{{router},pool="{w.length_pool}"}})'
            if w.length_pool is not None
            else f"sum({ROUTER_QUEUE}{{{router}}})"
        )
        mine = f'{engines},infctl_io_workload="{w.workload}"'
        queued = f"sum({waiting_series(metrics, mine)})"
        running = f"sum({running_series(metrics, mine)})"
        kind = (
            {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet"}
            if w.multi_node
            else {"apiVersion": "apps/v1", "kind": "Deployment"}
        )
        objects.append(
            {
                "apiVersion": API_VERSION,
                "kind": "ScaledObject",
                "metadata": {
                    "name": w.name,
                    "namespace": namespace,
                    "labels": L.release_labels(profile.name, "autoscaler", "infctl-keda"),
                },
                "spec": {
                    "scaleTargetRef": {**kind, "name": w.name},
                    "pollingInterval": max(1, round(profile.autoscaler.interval_s)),
                    "cooldownPeriod": max(1, round(stz.after_s)),
                    "minReplicaCount": 0,
                    "maxReplicaCount": bounds.max,
                    "triggers": [
                        _trigger("held", stz.prometheus, held, target),
                        _trigger("waiting", stz.prometheus, queued, target),
                        _trigger("running", stz.prometheus, running, ACTIVE_ONLY),
                    ],
                },
            }
        )
    return objects


def _trigger(name: str, server: str, query: str, target: str) -> dict[str, Any]:
    # KEDA's trigger metadata values are strings; an empty result (no engine at 0 replicas) reads as 0.
    metadata = {
        "serverAddress": server,
        "query": query,
        "threshold": target,
        "activationThreshold": "0",
        "ignoreNullValues": "true",
    }
    return {"type": "prometheus", "name": name, "metricType": "AverageValue", "metadata": metadata}
