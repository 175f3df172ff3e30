"""vLLM's command line and environment: a model profile turned into ``vllm.entrypoints.openai.api_server``
arguments (parallelism, prefix caching, the PD connector, KV offload and events, speculative decoding).

Pure: argument lists and dicts, no I/O. :class:`~infctl.engines.vllm.VLLMAdapter` delegates to it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from infctl.engines import kv_pool
from infctl.engines.base import Role, json_arg, kv_events_publisher, number_arg, pd_section

if TYPE_CHECKING:
    from infctl.config.model import ModelProfile

KV_CONNECTORS = {"nixl": "NixlConnector"}
"""Profile ``pd.kv_connector`` -> vLLM ``kv_connector`` class name (the profile refuses the others,
:data:`infctl.config.model.REFUSED_KV_CONNECTORS`)."""
KV_ROLES: dict[str, str] = {"prefill": "kv_producer", "decode": "kv_consumer", "both": "kv_both"}
LMCACHE_CHUNK_SIZE = 256
"""Tokens per LMCache chunk (its default), set explicitly so hashing is stable across upgrades."""
DP_RPC_PORT_FLAGS = ("--data-parallel-rpc-port", "-dpp")
"""vLLM's data-parallel handshake port (default 29550, the same for every engine on a machine)."""
NIXL_PORT_ENV = "VLLM_NIXL_SIDE_CHANNEL_PORT"
"""The NIXL connector's handshake listener: data-parallel rank r binds this port + r (default 5600, the same
for every engine on a machine) and names it in its ``kv_transfer_params`` (``remote_port``)."""
NIXL_HOST_ENV = "VLLM_NIXL_SIDE_CHANNEL_HOST"
"""The address that listener binds and names (``remote_host``; default ``localhost``)."""


def launch_command(model: ModelProfile, *, role: Role, port: int, host: str = "0.0.0.0") -> list[str]:
    """``python3 -m vllm.entrypoints.openai.api_server ...``; a local runner may swap argv[0]."""
    args = [
        "python3", "-m", "vllm.entrypoints.openai.api_server",
        "--model", model.model,
        "--served-model-name", model.served_model_name,
        "--host", host,
        "--port", str(port),
        "--tensor-parallel-size", str(model.tensor_parallel_size),
        "--data-parallel-size", str(model.data_parallel_size),
    ]  # fmt: skip
    if model.expert_parallel:
        args.append("--enable-expert-parallel")
    if model.enable_eplb:
        args.append("--enable-eplb")
    if model.max_model_len is not None:
        args += ["--max-model-len", str(model.max_model_len)]
    caching = "--enable-prefix-caching" if model.enable_prefix_caching else "--no-enable-prefix-caching"
    args.append(caching)
    if model.gpu_memory_utilization is not None:
        args += ["--gpu-memory-utilization", str(model.gpu_memory_utilization)]
    if role != "both":
        connector = pd_section(model, role, "{kv_connector: nixl}").kv_connector
        transfer = {"kv_connector": KV_CONNECTORS[connector], "kv_role": KV_ROLES[role]}
        args += ["--kv-transfer-config", json_arg(transfer)]
    if model.kv_offload is not None:
        args += ["--kv-offloading-size", number_arg(model.kv_offload.size_gib),
                 "--kv-offloading-backend", model.kv_offload.backend]  # fmt: skip
    publisher = kv_events_publisher(model)
    if publisher is not None:
        args += ["--kv-events-config", json_arg({"enable_kv_cache_events": True, **publisher})]
    if model.speculative is not None:
        args += ["--speculative-config", json_arg(_speculative_config(model))]
    args += ["--enable-prompt-tokens-details", "--enable-server-load-tracking"]
    return args + list(model.extra_args)


def host_port_runs(model: ModelProfile, role: Role = "both") -> dict[str, int]:
    """The ports an engine of ``model`` in ``role`` binds at a fixed default, which engines side by side on
    one machine must each get their own of: name -> how many consecutive ports. Empty for one rank
    without PD.

    A data-parallel engine's ``--data-parallel-rpc-port`` (29550 for every engine): bound for the ZMQ
    handshake whenever it goes over TCP (hybrid or external load balancing, elastic EP, ranks on other
    nodes), so ``dp_rpc`` gets one port. vLLM's other data-parallel sockets take their ports at bind time
    or are IPC (:mod:`infctl.local.engine_ports`). A flag already in ``extra_args`` is the user's choice.

    A PD engine (prefill or decode) on the NIXL connector serves its KV handshake on
    ``VLLM_NIXL_SIDE_CHANNEL_PORT`` + its data-parallel rank, so ``nixl_side_channel`` gets one port per
    rank; the prefill names it in each answer's ``kv_transfer_params``, which the decode leg carries back
    unchanged (no router setting). The variable already in the profile's ``env`` is the user's choice.
    """
    given = {word.split("=", 1)[0] for word in model.extra_args}
    runs: dict[str, int] = {}
    if model.data_parallel_size > 1 and not given.intersection(DP_RPC_PORT_FLAGS):
        runs["dp_rpc"] = 1
    if _nixl_pd(model, role) and NIXL_PORT_ENV not in model.env:
        runs["nixl_side_channel"] = model.data_parallel_size
    return runs


def host_port_args(ports: Mapping[str, int], host: str) -> list[str]:
    """The flags passing the ports :func:`host_port_runs` asked for (each run's first port under its name)."""
    return [DP_RPC_PORT_FLAGS[0], str(ports["dp_rpc"])] if "dp_rpc" in ports else []


def host_port_env(ports: Mapping[str, int], host: str) -> dict[str, str]:
    """The variables passing the ports :func:`host_port_runs` asked for: the NIXL side channel's first port
    (rank r adds r) and ``host``, the address it binds and names."""
    if "nixl_side_channel" not in ports:
        return {}
    return {NIXL_PORT_ENV: str(ports["nixl_side_channel"]), NIXL_HOST_ENV: host}


def pod_ip_env(model: ModelProfile, role: Role) -> tuple[str, ...]:
    """The variables that must hold the engine's own address when its peers are elsewhere (Kubernetes: the
    pod's IP): a NIXL PD engine's :data:`NIXL_HOST_ENV`. Its scheduler binds the side channel there and names
    it in every prefill answer (``remote_host``), so at vLLM's default ``localhost`` a decode in another pod
    would handshake with itself. Every NIXL pod carries it (prefill and decode, LWS workers too: a worker
    running data-parallel ranks serves their side channels; a tensor-parallel worker never binds it, its
    leader's listener serves every rank's metadata). The side-channel port stays vLLM's default (5600 + the
    data-parallel rank): each pod has its own IP. The variable already in the profile's ``env`` wins."""
    return (NIXL_HOST_ENV,) if _nixl_pd(model, role) and NIXL_HOST_ENV not in model.env else ()


def _nixl_pd(model: ModelProfile, role: Role) -> bool:
    """A prefill or decode engine moving KV over the NIXL connector (it serves a side channel)."""
    return role != "both" and model.pd is not None and model.pd.kv_connector == "nixl"


def launch_env(model: ModelProfile, role: Role) -> dict[str, str]:
    """The LMCache variables the offload needs (its server and disk tier included,
    :mod:`infctl.engines.kv_pool`) and the UCX one PD's RDMA needs, then the profile's ``env``."""
    env: dict[str, str] = {}
    if model.kv_offload is not None and model.kv_offload.backend == "lmcache":
        env["LMCACHE_CHUNK_SIZE"] = str(LMCACHE_CHUNK_SIZE)
        env["LMCACHE_LOCAL_CPU"] = "True"
        env["LMCACHE_MAX_LOCAL_CPU_SIZE"] = number_arg(model.kv_offload.size_gib)
        env.update(kv_pool.client_env(model))
    if role != "both" and model.pd is not None and model.pd.ib_device:
        env["UCX_NET_DEVICES"] = model.pd.ib_device
    env.update(model.env)
    return env


def _speculative_config(model: ModelProfile) -> dict[str, Any]:
    spec = model.speculative
    assert spec is not None
    config: dict[str, Any] = {"method": spec.method, "num_speculative_tokens": spec.num_speculative_tokens}
    if spec.draft_model is not None:
        config["model"] = spec.draft_model
    return config
