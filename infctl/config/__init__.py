"""Typed profiles (model, cluster, deployment) and the YAML loader that reports file:line and key path.

Load a deployment with :func:`load_deployment`; every mistake in it raises :class:`infctl.errors.ConfigError`
naming the file, line, key path, what was expected and what was found.
"""

from infctl.config._files import MAX_FILE_BYTES
from infctl.config._yaml import MAX_NODES, read_yaml
from infctl.config.cluster import ClusterProfile, StorageHints, Toleration
from infctl.config.deployment import (
    DeploymentProfile,
    GroupLayout,
    Mode,
    PoolLayout,
    ReplicaSpec,
    Role,
    Target,
)
from infctl.config.kv_pool import KVDiskTier, KVPoolConfig, KVPoolServers
from infctl.config.loader import (
    AnyProfile,
    load_cluster,
    load_deployment,
    load_model,
    load_profile,
    load_router,
)
from infctl.config.model import (
    EngineName,
    KVEventsConfig,
    KVOffloadConfig,
    ModelProfile,
    PDConfig,
    SimSettings,
    SpeculativeConfig,
)
from infctl.config.overrides import apply_overrides
from infctl.config.router import BackendEntry, RouterFile
from infctl.config.settings import (
    AutoscalerSettings,
    LocalSettings,
    RouterSettings,
    ScaleBounds,
    Thresholds,
    UsageThresholds,
)

__all__ = [
    "MAX_FILE_BYTES",
    "MAX_NODES",
    "AnyProfile",
    "AutoscalerSettings",
    "BackendEntry",
    "ClusterProfile",
    "DeploymentProfile",
    "EngineName",
    "GroupLayout",
    "KVDiskTier",
    "KVEventsConfig",
    "KVOffloadConfig",
    "KVPoolConfig",
    "KVPoolServers",
    "LocalSettings",
    "Mode",
    "ModelProfile",
    "PDConfig",
    "PoolLayout",
    "ReplicaSpec",
    "Role",
    "RouterFile",
    "RouterSettings",
    "ScaleBounds",
    "SimSettings",
    "SpeculativeConfig",
    "StorageHints",
    "Target",
    "Thresholds",
    "Toleration",
    "UsageThresholds",
    "apply_overrides",
    "load_cluster",
    "load_deployment",
    "load_model",
    "load_profile",
    "load_router",
    "read_yaml",
]
