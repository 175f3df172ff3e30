"""Where a shared KV pool lives (servers infctl renders, or a running one), and a disk tier behind engines.

A profile asks for a pool through ``kv_offload.storage_backend``: ``mooncake`` (SGLang HiCache's third tier,
a Mooncake store whose master every engine reaches) or ``lmcache`` (vLLM's LMCache backend with an LMCache
server as its remote tier). Such a backend cannot start without a server, so ``kv_offload.pool`` must say
either ``servers`` (infctl renders them, sized here) or ``address`` (a pool already running). The engine
facts (binaries, ports, variables) are in :mod:`infctl.engines.kv_pool`; this module only checks that the
profile is whole.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from infctl.config._base import Count, Problem, ProfileModel, raise_problems

POOL_BACKENDS: dict[str, str] = {"mooncake": "hicache", "lmcache": "lmcache"}
"""``kv_offload.storage_backend`` values that keep KV in a shared pool -> the backend each goes with."""


class KVPoolServers(ProfileModel):
    """The pool servers infctl renders beside the engines (Deployments and Services)."""

    replicas: Count = 1
    """Servers holding KV: Mooncake store services (each contributing ``segment_gib`` to the pool, behind one
    master infctl also renders), or the LMCache server (exactly 1: engines name one address). Default 1."""
    segment_gib: float = Field(gt=0)
    """Host memory each server holds KV in, GiB (Mooncake ``global_segment_size``; for LMCache's server, which
    has no evictor, the memory its pod may use before it is restarted empty)."""
    cpu: float = Field(default=2, gt=0)
    """CPU cores each server requests. Default 2."""
    image: str | None = None
    """Container image. Default None: the engine's own image, which ships the same Mooncake or LMCache release
    as the engines' clients (a master and its clients must speak one RPC version)."""


class KVPoolConfig(ProfileModel):
    """The shared pool behind ``kv_offload.storage_backend``: rendered by infctl (``servers``) or running
    already (``address``)."""

    servers: KVPoolServers | None = None
    """Render the pool's servers, sized as given. Exclusive with ``address``."""
    address: str | None = None
    """A running pool, ``host:port``: the Mooncake master's RPC address or the LMCache server's. Exclusive
    with ``servers``."""
    metadata_server: str | None = None
    """Mooncake with ``address`` only: the transfer engine's metadata service, an
    ``http://host:port/metadata`` URL or ``P2PHANDSHAKE``. Default None: ``P2PHANDSHAKE`` (peers exchange
    metadata directly). A rendered pool uses the HTTP metadata service its master runs."""
    protocol: Literal["rdma", "tcp"] = "rdma"
    """Mooncake only: how KV moves between engines and store servers; ``rdma`` uses ``pd.ib_device`` as the
    devices. Default rdma."""
    engine_segment_gib: float = Field(default=0, ge=0)
    """Mooncake only: host memory each engine rank also contributes to the pool, GiB. Default 0: the store
    servers hold the pool."""


class KVDiskTier(ProfileModel):
    """A disk tier behind the engines' host-memory KV cache (Mooncake SSD offload, LMCache local disk)."""

    size_gib: float = Field(gt=0)
    """Disk the engine may fill with KV, GiB."""
    host_path: str | None = None
    """Directory on each node (an NVMe mount), mounted as a hostPath volume. Exclusive with ``pvc``."""
    pvc: str | None = None
    """A PersistentVolumeClaim (ReadWriteMany, or one per node's replicas). Exclusive with ``host_path``."""
    mount_path: str = "/var/cache/infctl-kv"
    """Where the tier is mounted in the engine container. Default ``/var/cache/infctl-kv``."""

    @model_validator(mode="after")
    def _one_source(self) -> KVDiskTier:
        if (self.host_path is None) == (self.pvc is None):
            found = "both" if self.host_path is not None else "neither"
            raise_problems(
                [
                    Problem(
                        ("host_path",),
                        f"expected host_path or pvc, found {found}",
                        hint="e.g. `host_path: /mnt/nvme/kv` (a directory on every node) or `pvc: kv-disk`",
                        anchor=("size_gib",),
                    )
                ]
            )
        return self


def pool_problems(
    backend: str, storage: str | None, pool: KVPoolConfig | None, disk: KVDiskTier | None
) -> list[Problem]:
    """What is wrong with a ``kv_offload`` section's pool and disk tier (locations relative to it)."""
    problems: list[Problem] = []
    pooled = storage in POOL_BACKENDS and POOL_BACKENDS[storage] == backend
    if storage is not None and not pooled and backend != "hicache":
        pairs = ", ".join(f"{s!r} with backend {b!r}" for s, b in POOL_BACKENDS.items())
        problems.append(
            Problem(
                ("storage_backend",),
                f"{storage!r} is not a storage backend of backend {backend!r}; known: {pairs}",
                hint="vLLM reaches a Mooncake store only through LMCache's own configuration, which infctl "
                "does not render: use storage_backend: lmcache (an LMCache server)"
                if backend == "lmcache" and storage == "mooncake"
                else None,
            )
        )
    if pooled and pool is None:
        problems.append(
            Problem(
                ("pool",),
                f"storage_backend {storage!r} keeps KV in a shared pool whose server every engine must "
                "reach, found no pool",
                hint="add `pool: {servers: {segment_gib: 64}}` for infctl to render the servers, or "
                "`pool: {address: HOST:PORT}` for a running one",
                anchor=("storage_backend",),
            )
        )
    if pool is not None:
        problems += _pool_shape(storage if pooled else None, pool)
    if disk is not None and not (pooled or backend == "lmcache"):
        problems.append(
            Problem(
                ("disk",),
                f"backend {backend!r} with storage_backend {storage!r} has no disk tier infctl can configure",
                hint="a disk tier comes with storage_backend: mooncake (SGLang) or backend: lmcache (vLLM)",
            )
        )
    return problems


def _pool_shape(storage: str | None, pool: KVPoolConfig) -> list[Problem]:
    if storage is None:
        return [
            Problem(
                ("pool",),
                "only used with a pooled storage_backend (mooncake with backend hicache, lmcache with "
                "backend lmcache)",
                hint="remove pool, or set storage_backend",
            )
        ]
    problems: list[Problem] = []
    if (pool.servers is None) == (pool.address is None):
        found = "both" if pool.address is not None else "neither"
        problems.append(
            Problem(
                ("pool", "servers"),
                f"expected servers (infctl renders the pool) or address (a running one), found {found}",
                hint="e.g. `servers: {replicas: 2, segment_gib: 64}` or `address: mooncake-master.kv:50051`",
                anchor=("pool",),
            )
        )
    if pool.address is not None and not _host_port(pool.address):
        problems.append(
            Problem(
                ("pool", "address"), f"expected host:port, found {pool.address!r}", hint="e.g. kv-pool:50051"
            )
        )
    if pool.metadata_server is not None and (storage != "mooncake" or pool.address is None):
        problems.append(
            Problem(
                ("pool", "metadata_server"),
                "only meaningful for a running Mooncake pool (storage_backend mooncake with address)",
            )
        )
    if storage != "mooncake":
        problems += [
            Problem(("pool", key), f"only meaningful with storage_backend 'mooncake', found {storage!r}")
            for key in ("protocol", "engine_segment_gib")
            if key in pool.model_fields_set
        ]
        if pool.servers is not None and pool.servers.replicas > 1:
            problems.append(
                Problem(
                    ("pool", "servers", "replicas"),
                    f"engines name one LMCache server, found {pool.servers.replicas}",
                    hint="set replicas: 1 and size it with segment_gib",
                )
            )
    return problems


def _host_port(text: str) -> bool:
    host, sep, port = text.rpartition(":")
    return bool(sep and host and "/" not in text and port.isdigit() and 1 <= int(port) <= 65535)
