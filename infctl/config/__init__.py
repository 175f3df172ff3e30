"""Typed profiles (model, cluster, deployment) and the YAML loader that reports file:line and key path.

Load a deployment with :func:`load_deployment`; every mistake in it raises :class:`infctl.errors.ConfigError`
naming the file, line, key path, what was expected and what was found.
"""

from typing import TYPE_CHECKING

from infctl._lazy import lazy_exports

if TYPE_CHECKING:
    from infctl.config._engine import EngineName
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

_MODULES: dict[str, str] = {
    "MAX_FILE_BYTES": "infctl.config._files",
    "MAX_NODES": "infctl.config._yaml",
    "read_yaml": "infctl.config._yaml",
    "ClusterProfile": "infctl.config.cluster",
    "StorageHints": "infctl.config.cluster",
    "Toleration": "infctl.config.cluster",
    "DeploymentProfile": "infctl.config.deployment",
    "GroupLayout": "infctl.config.deployment",
    "Mode": "infctl.config.deployment",
    "PoolLayout": "infctl.config.deployment",
    "ReplicaSpec": "infctl.config.deployment",
    "Role": "infctl.config.deployment",
    "Target": "infctl.config.deployment",
    "KVDiskTier": "infctl.config.kv_pool",
    "KVPoolConfig": "infctl.config.kv_pool",
    "KVPoolServers": "infctl.config.kv_pool",
    "AnyProfile": "infctl.config.loader",
    "load_cluster": "infctl.config.loader",
    "load_deployment": "infctl.config.loader",
    "load_model": "infctl.config.loader",
    "load_profile": "infctl.config.loader",
    "load_router": "infctl.config.loader",
    "EngineName": "infctl.config._engine",
    "KVEventsConfig": "infctl.config.model",
    "KVOffloadConfig": "infctl.config.model",
    "ModelProfile": "infctl.config.model",
    "PDConfig": "infctl.config.model",
    "SimSettings": "infctl.config.model",
    "SpeculativeConfig": "infctl.config.model",
    "apply_overrides": "infctl.config.overrides",
    "BackendEntry": "infctl.config.router",
    "RouterFile": "infctl.config.router",
    "AutoscalerSettings": "infctl.config.settings",
    "LocalSettings": "infctl.config.settings",
    "RouterSettings": "infctl.config.settings",
    "ScaleBounds": "infctl.config.settings",
    "Thresholds": "infctl.config.settings",
    "UsageThresholds": "infctl.config.settings",
}
"""Where each name lives. A name is imported on first use: the router needs only its own file's model, and
importing every profile model (deployment, cluster, model: ~0.2 s of pydantic class building) was a fifth of
its start-up."""


__getattr__ = lazy_exports(__name__, _MODULES)


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
