"""The kinds infctl renders: REST plural, scope, apply phase, and for custom kinds the CRD and how to get it.

``infctl.kube`` builds request paths from this table (no discovery round-trips), the validator picks the
schema source from it, and the renderer orders output by ``phase``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Kind:
    api_version: str
    kind: str
    plural: str
    namespaced: bool = True
    phase: int = 1
    """Apply order: 0 namespace, 1 RBAC and config, 2 engines, 3 router, 4 autoscaler, 5 traffic,
    6 monitoring. Deletion runs in reverse."""
    crd: str | None = None
    """``<plural>.<group>`` for custom kinds; None for kinds every cluster serves."""
    install: str | None = None
    """How to install the CRD, for the missing-CRD error."""

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]

    def collection_path(self, namespace: str | None) -> str:
        base = f"/apis/{self.api_version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace is not None:
            return f"{base}/namespaces/{namespace}/{self.plural}"
        return f"{base}/{self.plural}"

    def object_path(self, name: str, namespace: str | None) -> str:
        return f"{self.collection_path(namespace)}/{name}"


PHASE_NAMES = ("namespace", "rbac and config", "engines", "router", "autoscaler", "traffic", "monitoring")

_GATEWAY = (
    "install the Gateway API CRDs: kubectl apply -f "
    "https://github.com/kubernetes-sigs/gateway-api/releases/download/v1.3.0/standard-install.yaml"
)
_LWS = (
    "install LeaderWorkerSet: kubectl apply --server-side -f "
    "https://github.com/kubernetes-sigs/lws/releases/download/v0.7.0/manifests.yaml"
)
_PROM = (
    "install the Prometheus Operator CRDs (e.g. helm install prometheus-operator-crds "
    "prometheus-community/prometheus-operator-crds), or render with --no-monitoring"
)
_GIE = (
    "install the Gateway API Inference Extension CRDs: kubectl apply -f "
    "https://github.com/kubernetes-sigs/gateway-api-inference-extension/releases/download/v1.0.0/manifests.yaml"
)

_VOLCANO = (
    "install Volcano (its scheduler and CRDs): kubectl apply -f "
    "https://raw.githubusercontent.com/volcano-sh/volcano/master/installer/volcano-development.yaml, "
    "or set cluster.gang.scheduler: affinity"
)
_COSCHEDULING = (
    "install scheduler-plugins as a second scheduler with coscheduling (helm install scheduler-plugins "
    "as-a-second-scheduler/ from kubernetes-sigs/scheduler-plugins), or set cluster.gang.scheduler: affinity"
)

_KUEUE = (
    "install Kueue (v0.14 or later: topology-aware scheduling on by default): kubectl apply --server-side -f "
    "https://github.com/kubernetes-sigs/kueue/releases/download/v0.19.2/manifests.yaml, "
    "or set cluster.gang.scheduler: affinity"
)

_KEDA = (
    "install KEDA: helm repo add kedacore https://kedacore.github.io/charts && "
    "helm install keda kedacore/keda -n keda --create-namespace, or set scale_to_zero.scaler: infctl"
)

_GKE = (
    "GKE's Gateway controller serves it: enable the Gateway API on the cluster "
    "(gcloud container clusters update CLUSTER --gateway-api=standard), or set cluster.gateway: standard"
)

KINDS: tuple[Kind, ...] = (
    Kind("v1", "Namespace", "namespaces", namespaced=False, phase=0),
    Kind("v1", "ServiceAccount", "serviceaccounts", phase=1),
    Kind("rbac.authorization.k8s.io/v1", "Role", "roles", phase=1),
    Kind("rbac.authorization.k8s.io/v1", "RoleBinding", "rolebindings", phase=1),
    Kind("v1", "ConfigMap", "configmaps", phase=1),
    Kind("v1", "Service", "services", phase=2),
    Kind("policy/v1", "PodDisruptionBudget", "poddisruptionbudgets", phase=2),
    Kind("apps/v1", "Deployment", "deployments", phase=2),
    Kind(
        "scheduling.volcano.sh/v1beta1",
        "PodGroup",
        "podgroups",
        phase=2,
        crd="podgroups.scheduling.volcano.sh",
        install=_VOLCANO,
    ),
    Kind(
        "scheduling.x-k8s.io/v1alpha1",
        "PodGroup",
        "podgroups",
        phase=2,
        crd="podgroups.scheduling.x-k8s.io",
        install=_COSCHEDULING,
    ),
    Kind(
        "leaderworkerset.x-k8s.io/v1",
        "LeaderWorkerSet",
        "leaderworkersets",
        phase=2,
        crd="leaderworkersets.leaderworkerset.x-k8s.io",
        install=_LWS,
    ),
    # Kueue's placement objects are the operator's (doctor reads them; infctl never renders them).
    Kind(
        "kueue.x-k8s.io/v1beta2",
        "Topology",
        "topologies",
        namespaced=False,
        crd="topologies.kueue.x-k8s.io",
        install=_KUEUE,
    ),
    Kind(
        "kueue.x-k8s.io/v1beta2",
        "ResourceFlavor",
        "resourceflavors",
        namespaced=False,
        crd="resourceflavors.kueue.x-k8s.io",
        install=_KUEUE,
    ),
    Kind(
        "keda.sh/v1alpha1",
        "ScaledObject",
        "scaledobjects",
        phase=4,
        crd="scaledobjects.keda.sh",
        install=_KEDA,
    ),
    Kind(
        "gateway.networking.k8s.io/v1",
        "HTTPRoute",
        "httproutes",
        phase=5,
        crd="httproutes.gateway.networking.k8s.io",
        install=_GATEWAY,
    ),
    Kind(
        "networking.gke.io/v1",
        "GCPBackendPolicy",
        "gcpbackendpolicies",
        phase=5,
        crd="gcpbackendpolicies.networking.gke.io",
        install=_GKE,
    ),
    Kind(
        "inference.networking.k8s.io/v1",
        "InferencePool",
        "inferencepools",
        phase=5,
        crd="inferencepools.inference.networking.k8s.io",
        install=_GIE,
    ),
    Kind(
        "monitoring.coreos.com/v1",
        "ServiceMonitor",
        "servicemonitors",
        phase=6,
        crd="servicemonitors.monitoring.coreos.com",
        install=_PROM,
    ),
    Kind(
        "monitoring.coreos.com/v1",
        "PodMonitor",
        "podmonitors",
        phase=6,
        crd="podmonitors.monitoring.coreos.com",
        install=_PROM,
    ),
    Kind(
        "monitoring.coreos.com/v1",
        "PrometheusRule",
        "prometheusrules",
        phase=6,
        crd="prometheusrules.monitoring.coreos.com",
        install=_PROM,
    ),
)

_BY_KEY = {(k.api_version, k.kind): k for k in KINDS}


def kind_of(obj: dict[str, object]) -> Kind:
    """The table entry for a rendered object; KeyError for a kind infctl does not render."""
    return _BY_KEY[(str(obj.get("apiVersion")), str(obj.get("kind")))]


def lookup(api_version: str, kind: str) -> Kind | None:
    return _BY_KEY.get((api_version, kind))
