"""The cluster profile: what the nodes look like and how to tell which switch a node hangs off."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from infctl.config._base import Count, Problem, ProfileModel, check_label_key, raise_problems


class Toleration(ProfileModel):
    """A Kubernetes toleration, in the API's own shape."""

    key: str | None = None
    """Taint key; None with operator Exists tolerates every taint."""
    operator: Literal["Exists", "Equal"] = "Equal"
    """Equal matches ``value``; Exists matches any value. Default Equal."""
    value: str | None = None
    """Taint value for operator Equal; must be absent for Exists."""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    """Taint effect to tolerate. Default None: every effect."""

    @model_validator(mode="after")
    def _check_operator(self) -> Toleration:
        problems = []
        if self.operator == "Exists" and self.value is not None:
            problems.append(
                Problem(("value",), f"must be absent with operator 'Exists', found {self.value!r}")
            )
        if self.operator == "Equal" and self.key is None:
            problems.append(
                Problem(
                    ("key",),
                    "expected a taint key with operator 'Equal', found nothing",
                    hint="use operator: Exists without a key to tolerate every taint",
                )
            )
        raise_problems(problems)
        return self


class StorageHints(ProfileModel):
    """Where engines find model weights, so replicas do not each download them."""

    host_path: str | None = None
    """Directory on every node holding the model cache, mounted as a hostPath volume."""
    pvc: str | None = None
    """Name of a PersistentVolumeClaim (ReadOnlyMany or ReadWriteMany) holding the model cache."""
    mount_path: str = "/root/.cache/huggingface"
    """Where the cache is mounted in the engine container. Default ``/root/.cache/huggingface``."""

    @model_validator(mode="after")
    def _one_source(self) -> StorageHints:
        if self.host_path is not None and self.pvc is not None:
            raise_problems([Problem(("pvc",), "expected either host_path or pvc, found both")])
        return self


class MonitoringSettings(ProfileModel):
    """Labels the cluster's monitoring stack selects rendered objects by. The defaults are what a stock
    kube-prometheus-stack selects: its Prometheus takes PodMonitors, ServiceMonitors and PrometheusRules
    labelled ``release: <its Helm release>`` (``kube-prometheus-stack`` when installed under that name),
    its Grafana sidecar ConfigMaps labelled ``grafana_dashboard: "1"``."""

    prometheus_labels: dict[str, str] = Field(default_factory=lambda: {"release": "kube-prometheus-stack"})
    """Added to PodMonitors, ServiceMonitors and PrometheusRules: match the Prometheus resource's
    ``podMonitorSelector``, ``serviceMonitorSelector`` and ``ruleSelector``. Default
    ``{release: kube-prometheus-stack}``."""
    dashboard_labels: dict[str, str] = Field(default_factory=lambda: {"grafana_dashboard": "1"})
    """Added to dashboard ConfigMaps: match the Grafana sidecar's ``label``/``labelValue``. Default
    ``{grafana_dashboard: "1"}``."""

    @field_validator("prometheus_labels", "dashboard_labels")
    @classmethod
    def _label_keys(cls, value: dict[str, str]) -> dict[str, str]:
        for key in value:
            check_label_key(key)
        return value


GangScheduler = Literal["affinity", "volcano", "scheduler-plugins", "lws", "kueue"]
KueueTopology = Literal["required", "preferred"]


class GangSettings(ProfileModel):
    """How a PD group is scheduled whole or not at all (group mode). Every mechanism keeps the group under
    one switch; a gang mechanism also holds its pods until all of them fit, so a group is never left
    half-scheduled holding GPUs it cannot use."""

    scheduler: GangScheduler = "affinity"
    """``affinity``: pod affinity alone (the first pod picks the switch; no gang, doctor warns);
    ``volcano``: a Volcano PodGroup per PD group (``scheduling.volcano.sh/v1beta1``), pods scheduled by
    Volcano; ``scheduler-plugins``: a coscheduling PodGroup per PD group (``scheduling.x-k8s.io/v1alpha1``),
    pods scheduled by the scheduler-plugins scheduler; ``lws``: every PD group one LeaderWorkerSet replica
    with LWS exclusive topology on the switch label (each engine replica a subgroup); ``kueue``: the same
    LeaderWorkerSet admitted by Kueue, each group placed by topology-aware scheduling under one switch.
    Default affinity."""
    scheduler_name: str | None = None
    """The pods' ``schedulerName``. Default: ``volcano``, or ``scheduler-plugins-scheduler`` (the name the
    project's Helm chart installs it under); the default scheduler for lws and kueue."""
    queue: str | None = None
    """Volcano: the queue PodGroups are admitted from. Default None: Volcano's ``default`` queue."""
    network_tier: Annotated[int, Field(ge=1)] | None = None
    """Volcano: the highest HyperNode tier a group may span (network-topology-aware scheduling, hard
    mode), e.g. 1 for one leaf switch. Default None: the switch is held by pod affinity alone."""
    schedule_timeout_s: Annotated[int, Field(ge=1)] | None = None
    """scheduler-plugins: how long a group's pods wait for the whole group before the attempt is retried.
    Default None: the plugin's default."""
    subgroup_topology: str | None = None
    """lws: node label each engine replica (an LWS subgroup) is held under, alone
    (``leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology``), e.g. an NVLink-domain or rack label.
    Default None: a replica's nodes are only held under the group's switch."""
    queue_name: str | None = None
    """kueue: the LocalQueue (in the release's namespace) the groups are admitted from. Required."""
    topology: KueueTopology = "required"
    """kueue: ``required`` admits a group only when it fits under one switch label value
    (``podset-required-topology``); ``preferred`` tries one switch, then the next level up. Default
    required."""
    topology_name: str | None = None
    """kueue: the Topology object (cluster-scoped, the operator's) doctor checks lists the switch label.
    Default None: any Topology listing it."""

    @field_validator("subgroup_topology")
    @classmethod
    def _a_label_key(cls, value: str | None) -> str | None:
        return None if value is None else check_label_key(value)

    @model_validator(mode="after")
    def _fields_of_the_scheduler(self) -> GangSettings:
        owners = {
            "queue": ("volcano",),
            "network_tier": ("volcano",),
            "schedule_timeout_s": ("scheduler-plugins",),
            "subgroup_topology": ("lws",),
            "queue_name": ("kueue",),
            "topology_name": ("kueue",),
        }
        problems = [
            Problem(
                (key,), f"only used with scheduler {' or '.join(owner)}, found it with {self.scheduler!r}"
            )
            for key, owner in owners.items()
            if getattr(self, key) is not None and self.scheduler not in owner
        ]
        if self.scheduler == "kueue" and self.queue_name is None:
            problems.append(
                Problem(
                    ("queue_name",),
                    "expected the LocalQueue Kueue admits the groups from, found nothing",
                    hint="set cluster.gang.queue_name to a LocalQueue in the release's namespace",
                )
            )
        raise_problems(problems)
        return self

    @property
    def pod_scheduler(self) -> str | None:
        """``schedulerName`` for the engine pods; None: the default scheduler."""
        default = {"volcano": "volcano", "scheduler-plugins": "scheduler-plugins-scheduler"}
        return self.scheduler_name or default.get(self.scheduler)

    @property
    def one_set_per_group(self) -> bool:
        """Each PD group is one LeaderWorkerSet replica (lws, kueue) rather than a workload per role."""
        return self.scheduler in ("lws", "kueue")


class ClusterProfile(ProfileModel):
    """A pool of GPU nodes: resource names, placement labels, taints and storage."""

    name: str = Field(min_length=1)
    """Name shown in summaries and labels, e.g. ``h200-ib``."""
    switch_label: str
    """Node label whose value names the network switch (or block) a node is attached to, e.g.
    ``network.topology.nvidia.com/block``; a PD group is kept under one value of it."""
    gpu_resource: str = "nvidia.com/gpu"
    """Extended resource name of a GPU. Default ``nvidia.com/gpu``."""
    gpus_per_node: Count
    """GPUs on each node; replicas larger than this span whole nodes."""
    nodes_per_switch: Count | None = None
    """Nodes under one switch label value, when known; placement checks a group fits. Default None."""
    rdma_resource: str | None = None
    """Extended resource for RDMA NICs, e.g. ``rdma/ib`` or ``vpc.amazonaws.com/efa``. Default None."""
    rdma_per_pod: Count = 1
    """How many ``rdma_resource`` units each engine pod requests. Default 1."""
    node_selector: dict[str, str] = Field(default_factory=dict)
    """Labels every engine node must carry, e.g. ``nvidia.com/gpu.product: NVIDIA-H200``."""
    tolerations: list[Toleration] = Field(default_factory=list)
    """Taints engine pods tolerate."""
    storage: StorageHints | None = None
    """Model-cache volume. Default None: every pod downloads the weights."""
    monitoring: MonitoringSettings = MonitoringSettings()
    """Labels the Prometheus Operator and the Grafana sidecar select by (kube-prometheus-stack's default)."""
    gang: GangSettings = GangSettings()
    """How PD groups are scheduled whole (a gang scheduler's PodGroups, LeaderWorkerSet exclusive topology,
    Kueue topology-aware scheduling, or pod affinity alone)."""
    create_namespace: bool = False
    """Render a Namespace object for the deployment's namespace (applied first). Default false: the
    namespace exists, or ``kubectl create namespace`` makes it."""
    gateway: Literal["standard", "gke"] = "standard"
    """The Gateway implementation the HTTPRoute attaches to. ``standard`` (Envoy Gateway, Istio, kgateway,
    any with the HTTPRoute ``timeouts`` of Gateway API v1.2+): the route's timeouts outlast the longest
    request. ``gke`` (GKE's gke-l7 classes refuse a route with ``timeouts``): the route has none, and a
    GCPBackendPolicy raises the load balancer's backend timeout (30 s by default) to the same bound
    (docs/gateway.md). Default standard."""

    @field_validator("switch_label")
    @classmethod
    def _switch_label_is_a_label_key(cls, value: str) -> str:
        return check_label_key(value)
