"""KV pools: the servers a shared KV tier needs, the variables engines reach them by, and the disk tier.

Two pools, as the engines use them:

- **Mooncake store** (SGLang ``--hicache-storage-backend mooncake``). One ``mooncake_master`` serves the
  master RPC (``--rpc_port``, 50051) and, with ``--enable_http_metadata_server=true``, the transfer engine's
  HTTP metadata service (``--http_metadata_server_port``, 8080) and metrics (``--metrics_port``, 9003). Store
  services (``python3 -m mooncake.mooncake_store_service --config FILE``) each register a memory segment with
  it. SGLang's Mooncake client reads ``MOONCAKE_MASTER`` (host:port), ``MOONCAKE_TE_META_DATA_SERVER``
  (default ``P2PHANDSHAKE``), ``MOONCAKE_PROTOCOL`` (default rdma), ``MOONCAKE_DEVICE``,
  ``MOONCAKE_GLOBAL_SEGMENT_SIZE`` (default 4 GB: each engine rank would contribute that much) and
  ``MOONCAKE_LOCAL_HOSTNAME``: the address peers reach this process at, ``localhost`` unless set, so on
  Kubernetes the pod's IP. SSD offload: ``MOONCAKE_ENABLE_SSD_OFFLOAD``,
  ``MOONCAKE_OFFLOAD_FILE_STORAGE_PATH`` and ``MOONCAKE_OFFLOAD_TOTAL_SIZE_LIMIT_BYTES`` on the client,
  ``--enable_offload=true`` on the master.
- **LMCache server** (vLLM ``--kv-offloading-backend lmcache`` with a remote tier). ``python3 -m
  lmcache.v1.server HOST PORT cpu`` (LMCache's ``lmcache_server`` entry point) keeps chunks in memory with no
  evictor. Engines name it ``LMCACHE_REMOTE_URL=lm://host:port`` with ``LMCACHE_REMOTE_SERDE=naive``; its
  local disk tier is ``LMCACHE_LOCAL_DISK=file://DIR/`` with ``LMCACHE_MAX_LOCAL_DISK_SIZE`` (GB).

The master and its clients must run one Mooncake release (the RPC changes between releases), and an LMCache
client and server one LMCache release, so a rendered pool runs the engine's own image unless told otherwise:
the SGLang image ships ``mooncake-transfer-engine`` (``mooncake_master`` included), and a vLLM image that runs
LMCache ships ``lmcache``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from infctl.engines.cmdline import number_arg

if TYPE_CHECKING:
    from infctl.config.kv_pool import KVPoolConfig
    from infctl.config.model import ModelProfile

PoolKind = Literal["mooncake", "lmcache"]

MOONCAKE_MASTER_PORT = 50051
MOONCAKE_METADATA_PORT = 8080
MOONCAKE_METRICS_PORT = 9003
MOONCAKE_STORE_HTTP_PORT = 8080
"""The store service's REST API (its ``--port`` default)."""
LMCACHE_SERVER_PORT = 65432
P2P_HANDSHAKE = "P2PHANDSHAKE"
STORE_CONFIG_PATH = "/tmp/mooncake-store.json"
GIB = 1024**3
MEMORY_HEADROOM_GIB = 2.0
"""Memory a pool server needs beyond the KV it holds (the process, buffers, the Python runtime)."""


@dataclass(frozen=True, slots=True)
class PoolEndpoint:
    """One address engines need to reach (and doctor checks)."""

    name: str
    """What listens there: ``master``, ``metadata``, ``server``."""
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class PoolServer:
    """One kind of pool server to run: a Deployment of ``replicas`` pods and, when ``service``, a Service."""

    component: str
    """Name suffix and label: ``kv-master``, ``kv-store``, ``kv-server``."""
    replicas: int
    command: list[str]
    ports: dict[str, int]
    """Port name -> container port; the first is probed (TCP) and, with ``service``, exposed."""
    env: dict[str, str] = field(default_factory=dict)
    pod_ip_env: tuple[str, ...] = ()
    """Variables that hold the pod's own IP (downward API); ``$POD_IP`` in ``command`` reads ``POD_IP``."""
    memory_gib: float = MEMORY_HEADROOM_GIB
    cpu: float = 1.0
    service: bool = True
    rdma: bool = False
    """Moves KV over RDMA: needs the cluster's RDMA resource and IPC_LOCK."""


def pool_kind(model: ModelProfile) -> PoolKind | None:
    """The shared pool the profile's KV offload uses, if any."""
    off = model.kv_offload
    if off is None or off.pool is None:
        return None
    if off.backend == "hicache" and off.storage_backend == "mooncake":
        return "mooncake"
    if off.backend == "lmcache" and off.storage_backend == "lmcache":
        return "lmcache"
    return None


def _pool(model: ModelProfile) -> KVPoolConfig:
    assert model.kv_offload is not None and model.kv_offload.pool is not None
    return model.kv_offload.pool


def rendered_endpoints(model: ModelProfile, host: dict[str, str]) -> tuple[str, str | None]:
    """(address, metadata server) of a rendered pool whose Services are named ``host[component]``."""
    if pool_kind(model) == "mooncake":
        master = host["kv-master"]
        return f"{master}:{MOONCAKE_MASTER_PORT}", f"http://{master}:{MOONCAKE_METADATA_PORT}/metadata"
    return f"{host['kv-server']}:{LMCACHE_SERVER_PORT}", None


def endpoints(model: ModelProfile) -> list[PoolEndpoint]:
    """What engines connect to, from ``pool.address`` (and Mooncake's ``metadata_server`` when it is HTTP).
    Empty without a pool or before a rendered pool's address is known."""
    kind = pool_kind(model)
    if kind is None or _pool(model).address is None:
        return []
    pool = _pool(model)
    assert pool.address is not None
    host, _, port = pool.address.rpartition(":")
    found = [PoolEndpoint("master" if kind == "mooncake" else "server", host, int(port))]
    meta = pool.metadata_server
    if kind == "mooncake" and meta and meta.startswith(("http://", "https://")):
        rest = meta.split("://", 1)[1].split("/", 1)[0]
        mhost, sep, mport = rest.rpartition(":")
        if sep and mport.isdigit():
            found.append(PoolEndpoint("metadata", mhost, int(mport)))
        else:
            found.append(PoolEndpoint("metadata", rest, 443 if meta.startswith("https") else 80))
    return found


def client_env(model: ModelProfile) -> dict[str, str]:
    """The variables an engine needs for its pool (once ``pool.address`` is known) and disk tier."""
    kind = pool_kind(model)
    env: dict[str, str] = {}
    if kind is not None and _pool(model).address is not None:
        env.update(_mooncake_env(model) if kind == "mooncake" else _lmcache_env(model))
    return {**env, **_disk_env(model)}


def client_pod_ip_env(model: ModelProfile) -> tuple[str, ...]:
    """Variables that must hold the engine pod's own IP: the address Mooncake peers reach it at."""
    return ("MOONCAKE_LOCAL_HOSTNAME",) if pool_kind(model) == "mooncake" else ()


def _mooncake_env(model: ModelProfile) -> dict[str, str]:
    pool = _pool(model)
    env = {
        "MOONCAKE_MASTER": str(pool.address),
        "MOONCAKE_TE_META_DATA_SERVER": pool.metadata_server or P2P_HANDSHAKE,
        "MOONCAKE_PROTOCOL": pool.protocol,
        "MOONCAKE_GLOBAL_SEGMENT_SIZE": str(int(pool.engine_segment_gib * GIB)),
    }
    if pool.protocol == "rdma" and model.pd is not None and model.pd.ib_device:
        env["MOONCAKE_DEVICE"] = model.pd.ib_device
    return env


def _lmcache_env(model: ModelProfile) -> dict[str, str]:
    return {"LMCACHE_REMOTE_URL": f"lm://{_pool(model).address}", "LMCACHE_REMOTE_SERDE": "naive"}


def _disk_env(model: ModelProfile) -> dict[str, str]:
    off = model.kv_offload
    disk = off.disk if off is not None else None
    if off is None or disk is None:
        return {}
    if off.backend == "lmcache":
        return {
            "LMCACHE_LOCAL_DISK": f"file://{disk.mount_path.rstrip('/')}/",
            "LMCACHE_MAX_LOCAL_DISK_SIZE": number_arg(disk.size_gib),
        }
    return {
        "MOONCAKE_ENABLE_SSD_OFFLOAD": "true",
        "MOONCAKE_OFFLOAD_FILE_STORAGE_PATH": disk.mount_path,
        "MOONCAKE_OFFLOAD_TOTAL_SIZE_LIMIT_BYTES": str(int(disk.size_gib * GIB)),
    }


def servers(model: ModelProfile, master_host: str) -> list[PoolServer]:
    """The pool servers to render for a profile whose pool has ``servers`` (empty otherwise); store services
    reach the master at ``master_host``."""
    kind = pool_kind(model)
    pool = _pool(model) if kind is not None else None
    if pool is None or pool.servers is None:
        return []
    spec = pool.servers
    memory = spec.segment_gib + MEMORY_HEADROOM_GIB
    if kind == "lmcache":
        argv = ["python3", "-m", "lmcache.v1.server", "0.0.0.0", str(LMCACHE_SERVER_PORT), "cpu"]
        return [
            PoolServer(
                "kv-server", 1, argv, {"lmcache": LMCACHE_SERVER_PORT}, memory_gib=memory, cpu=spec.cpu
            )
        ]
    master = [
        "mooncake_master",
        f"--rpc_port={MOONCAKE_MASTER_PORT}",
        "--enable_http_metadata_server=true",
        f"--http_metadata_server_port={MOONCAKE_METADATA_PORT}",
        f"--metrics_port={MOONCAKE_METRICS_PORT}",
    ]
    off = model.kv_offload
    if off is not None and off.disk is not None:
        master.append("--enable_offload=true")
    ports = {
        "rpc": MOONCAKE_MASTER_PORT,
        "metadata": MOONCAKE_METADATA_PORT,
        "metrics": MOONCAKE_METRICS_PORT,
    }
    return [
        PoolServer("kv-master", 1, master, ports, cpu=1.0),
        PoolServer(
            "kv-store",
            spec.replicas,
            _store_command(model, master_host),
            {"http": MOONCAKE_STORE_HTTP_PORT},
            pod_ip_env=("POD_IP",),
            memory_gib=memory,
            cpu=spec.cpu,
            service=False,
            rdma=pool.protocol == "rdma",
        ),
    ]


def _store_command(model: ModelProfile, master_host: str) -> list[str]:
    """The store service, its config file written at start (its local hostname is the pod's IP)."""
    pool = _pool(model)
    assert pool.servers is not None
    config = {
        "local_hostname": "@POD_IP@",
        "metadata_server": f"http://{master_host}:{MOONCAKE_METADATA_PORT}/metadata",
        "master_server_address": f"{master_host}:{MOONCAKE_MASTER_PORT}",
        "protocol": pool.protocol,
        "device_name": (model.pd.ib_device or "") if pool.protocol == "rdma" and model.pd is not None else "",
        "global_segment_size": int(pool.servers.segment_gib * GIB),
        "local_buffer_size": 0,
    }
    text = json.dumps(config, separators=(",", ":")).replace("@POD_IP@", '"$POD_IP"'.join(("'", "'")))
    script = (
        f"printf '%s' '{text}' > {STORE_CONFIG_PATH} && "
        f"exec python3 -m mooncake.mooncake_store_service --config={STORE_CONFIG_PATH}"
    )
    return ["/bin/sh", "-c", script]
