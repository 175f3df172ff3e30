"""SGLang's command line and environment: a model profile turned into ``sglang.launch_server`` arguments
(parallelism and DP attention, the radix cache, PD disaggregation, the hierarchical cache, KV events and
their page, speculative decoding) and variables (:func:`launch_env`), the first release that accepts each
flag it emits (:data:`FLAG_VERSIONS`) and the flags SGLang renamed, spelled as the profile's image expects
(:data:`RENAMED_FLAGS`).

Pure: argument lists and dicts, no I/O. :class:`~infctl.engines.sglang.SGLangAdapter` delegates to it.

Host ports (:func:`host_port_runs`; the local target, :mod:`infctl.local.engine_ports`, gives each engine
its own so that engines side by side on one machine never share one).

SGLang (``srt/server_args.py`` ``PortArgs.init_new``, ``srt/managers/data_parallel_controller.py``): plain
``--dp-size N`` uses IPC and a free NCCL port per rank (held while the ranks start), and a fixed
``--nccl-port`` or ``--dist-init-addr`` would be shared by all N ranks, so it gets nothing. With DP attention
(``--enable-dp-attention``; ``--attn-dp-size N`` from 0.5.22) every socket is TCP: ``--dist-init-addr``'s
port (default ``--port`` + 233 on one node) + 0..6 and + 13, so two engines on HTTP ports less than 14
apart collide; each gets its own run (``dist_init``), passed as ``--dist-init-addr 127.0.0.1:PORT``.

SGLang PD (``srt/disaggregation``): a prefill engine serves its bootstrap server (where decode engines
meet it, ``bootstrap_room`` by ``bootstrap_room``) on ``--disaggregation-bootstrap-port``, default 8998 and
one value per profile; two local prefill engines would both bind it. Each gets its own (``bootstrap``),
which the planner writes into that engine's model (``pd.bootstrap_port``) and names in its router backend
(``bootstrap_port=``), so the router sends each request's ``bootstrap_port`` to the right prefill. A
simulated prefill engine gets one too: it reports it (``/server_info``) and meets its decode by it, as the
real one does, so the router's requests are the same on both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from infctl.engines import kv_pool
from infctl.engines.base import MultiNodeArgs, Role
from infctl.engines.cmdline import (
    DIST_PORT,
    LWS_LEADER_ADDRESS,
    LWS_WORKER_INDEX,
    json_arg,
    kv_events_publisher,
    last_count,
    number_arg,
    pd_section,
)
from infctl.engines.versions import Version, image_version

if TYPE_CHECKING:
    from infctl.config.model import ModelProfile

IMAGE = "lmsysorg/sglang:v0.5.15"
"""A pinned release (``latest`` floats and cannot be checked) that accepts every flag below."""
OLDEST_CHECKED: Version = (0, 4, 0)
FLAG_VERSIONS: dict[str, Version] = {
    "--ep-size": (0, 4, 1),
    "--speculative-algorithm": (0, 4, 2),
    "--speculative-draft-model-path": (0, 4, 2),
    "--speculative-num-steps": (0, 4, 2),
    "--speculative-eagle-topk": (0, 4, 2),
    "--speculative-num-draft-tokens": (0, 4, 2),
    "--enable-hierarchical-cache": (0, 4, 3),
    # Read in the PyPI wheels' sglang/srt/server_args.py: in 0.4.4, absent from 0.4.3 through 0.4.3.post4.
    "--page-size": (0, 4, 4),
    "--disaggregation-mode": (0, 4, 5),
    "--disaggregation-bootstrap-port": (0, 4, 5),
    "--disaggregation-transfer-backend": (0, 4, 6),
    "--disaggregation-ib-device": (0, 4, 6),
    "--hicache-size": (0, 4, 6),
    "--enable-eplb": (0, 4, 7),
    "--kv-events-config": (0, 4, 7),
    "--hicache-storage-backend": (0, 4, 10),
    "--speculative-algorithm=NGRAM": (0, 5, 3),
}
"""First release accepting each flag this module emits (the multi-node flags included) that 0.4.0 lacks,
read from the released packages' ``sglang/srt/server_args.py`` (and ``srt/arg_groups/`` from 0.5.14 on,
where flags are dataclass fields) for 0.4.0-0.4.10, 0.5.1-0.5.6, 0.5.8, 0.5.10, 0.5.14, 0.5.15, 0.5.18 and
0.5.23; 0.4.10 is also the first whose ``--hicache-storage-backend`` offers ``mooncake``."""

DP_ATTENTION_FLAG = "--enable-dp-attention"
RENAMED_FLAGS: dict[str, tuple[str, Version]] = {
    DP_ATTENTION_FLAG: ("--attn-dp-size", (0, 5, 22)),
}
"""Flags SGLang renamed: the old spelling -> the new one and the first release that accepts it. An image of
that release or later gets the new spelling (:func:`new_spelling`), older ones the old, so no image is given
a flag it lacks and :data:`FLAG_VERSIONS` needs no entry for the new one.

``--dp-size N --enable-dp-attention`` became ``--attn-dp-size N`` in 0.5.22 (``srt/arg_groups/fields/
parallel.py``: ``attn_dp_size``, alias ``--attention-data-parallel-size``; absent as a flag from 0.5.15
through 0.5.21, where ``attn_dp_size`` is derived). In 0.5.22 and 0.5.23 the old spelling still works, with
a deprecation warning, "removal after 2026-12-31" (``server_args.py``), and resolves to the same layout
(``arg_groups/parallel_hook.py`` ``handle_deprecated_dp_attention``: ``attn_dp_size = dp_size``,
``dp_size = 1``); ``--dp-size`` now counts whole replicas, and ``--dp-size N`` beside ``--attn-dp-size N``
(both above 1) is refused ("data-parallel replicas combined with attention data parallelism are not
supported"), so the new spelling drops it."""

DP_SIZE_FLAGS = ("--dp-size", "--data-parallel-size")
ATTN_DP_SIZE_FLAGS = ("--attn-dp-size", "--attention-data-parallel-size")


def dp_ranks(argv: Sequence[str]) -> int:
    """How many data-parallel ranks an ``sglang.launch_server`` started with ``argv`` serves behind its port:
    the count a PD prefill's bootstrap rooms are drawn modulo, and the ranks a request may be pinned to. The
    last value of a flag counts, as argparse takes it (a profile's ``extra_args`` come last).

    0.5.15 through 0.5.21: ``dp_size``, DP attention or not (``DataParallelController.workers`` has
    ``max_dp_size`` entries, ``dp_size`` unless elastic EP sets ``--max-ep-size``, and
    ``follow_bootstrap_room_scheduler`` sends a request to ``bootstrap_room % len(self.workers)``).
    0.5.22 and 0.5.23: ``num_dp_ranks``, ``dp_size * attn_dp_size`` (``srt/runtime_context.py``
    ``num_dp_ranks_of``; the controller's workers and ``CommonKVSender``'s "follow_bootstrap_room conflict"
    check both use it), where the deprecated ``--dp-size N --enable-dp-attention`` resolves to
    ``attn_dp_size = N``, ``dp_size = 1`` unless ``--attn-dp-size`` is given too (``arg_groups/
    parallel_hook.py`` ``handle_deprecated_dp_attention``), and both above 1 are refused
    (``handle_data_parallelism``). One rule serves every release: ``--attn-dp-size`` exists only from 0.5.22
    (:data:`RENAMED_FLAGS`; an older release refuses to start with it), and without it both readings give
    ``dp_size``. Elastic EP's wider worker list
    (``--max-ep-size``) is not counted."""
    dp, attn = last_count(argv, DP_SIZE_FLAGS), last_count(argv, ATTN_DP_SIZE_FLAGS)
    if DP_ATTENTION_FLAG in argv and attn == 1:
        dp, attn = 1, dp
    return dp * attn


DIST_INIT_FLAG = "--dist-init-addr"
BOOTSTRAP_FLAG = "--disaggregation-bootstrap-port"
ZMQ_PORTS_AFTER_DIST_INIT = 6
"""SGLang's ``PortArgs`` with DP attention: tokenizer, detokenizer, RPC, metrics, scheduler input and load
collector listen on the dist-init port + 1 .. + 6 (+ one per rank more under ``SGLANG_RUST_SERVER``)."""
HANDSHAKE_DELTA = 13
"""``DP_ATTENTION_HANDSHAKE_PORT_DELTA``: the worker-port handshake binds the dist-init port + 13."""
PAGE_SIZE_FLAG = "--page-size"
KV_EVENTS_PAGE_SIZE = 16
"""The KV page an SGLang engine that publishes KV events gets unless ``extra_args`` sets one. Its radix
cache publishes one ``BlockStored`` per page (``KVCacheEventMixin``) and the default page is 1 token: an
event, and a link in the router's index, per cached token. 16 is the router's default block and vLLM's,
so each event is one router block. Backends that need another page (FlashMLA 64, cutlass MLA 128) set
their own, and the router re-chunks any page size.

What the publisher sends (``srt/disaggregation/kv_events.py``, 0.5.15 and 0.5.23): vLLM's frames (topic,
8-byte big-endian sequence, msgpack ``[ts, events, attn_dp_rank]``), one publisher per data-parallel rank on
the endpoint's port + rank, from the scheduler of attention-TP rank 0; ``--kv-events-config`` takes
``publisher``, ``endpoint``, ``topic`` (and ``replay_endpoint``, ``buffer_steps``, ``hwm``,
``max_queue_size``). Each event is a tagged array in 0.5.15 (``["BlockStored", hashes, parent, token_ids,
block_size, lora_id, medium]``) and a map tagged ``type`` in 0.5.23, as vLLM's; host-tier copies carry
``medium`` ``CPU_PINNED`` (or ``DISK``, ``EXTERNAL``)."""


HEALTH_GENERATION_ENV = "SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION"
"""True by default in 0.5.15 and 0.5.23 (``srt/environ.py``), which makes ``/health`` what
``/health_generate`` is: a one-token generation whose answer comes no sooner than a second
(``http_server.health_generate`` polls once a second, for up to ``SGLANG_HEALTH_CHECK_TIMEOUT``, 20 s), so a
probe with a 1 s timeout (a startupProbe without ``timeoutSeconds``) never passes. Set false, ``/health``
answers at once: 503 while starting (until the warm-up request has run) or shutting down, 200 otherwise;
``/health_generate`` still generates."""


def launch_command(model: ModelProfile, *, role: Role, port: int, host: str = "0.0.0.0") -> list[str]:
    """``python3 -m sglang.launch_server ...``; a local runner may swap argv[0]."""
    tp, dp = model.tensor_parallel_size, model.data_parallel_size
    # With DP attention the replica is one TP group of tp*dp GPUs whose attention runs dp-way.
    tp_size = tp * dp if model.dp_attention else tp
    args = [
        "python3", "-m", "sglang.launch_server",
        "--model-path", model.model,
        "--served-model-name", model.served_model_name,
        "--host", host,
        "--port", str(port),
        "--tp-size", str(tp_size),
        *_dp_args(model),
    ]  # fmt: skip
    if model.expert_parallel:
        args += ["--ep-size", str(tp_size)]
    if model.enable_eplb:
        args.append("--enable-eplb")
    if model.max_model_len is not None:
        args += ["--context-length", str(model.max_model_len)]
    if not model.enable_prefix_caching:
        args.append("--disable-radix-cache")
    if model.gpu_memory_utilization is not None:
        args += ["--mem-fraction-static", str(model.gpu_memory_utilization)]
    args += _pd_args(model, role)
    if model.kv_offload is not None:
        args += ["--enable-hierarchical-cache", "--hicache-size", number_arg(model.kv_offload.size_gib)]
        if model.kv_offload.storage_backend:
            args += ["--hicache-storage-backend", model.kv_offload.storage_backend]
    publisher = kv_events_publisher(model)
    if publisher is not None:
        args += ["--kv-events-config", json_arg(publisher)]
        if PAGE_SIZE_FLAG not in {word.split("=", 1)[0] for word in model.extra_args}:
            args += [PAGE_SIZE_FLAG, str(KV_EVENTS_PAGE_SIZE)]
    args += _speculative_args(model)
    args += ["--enable-metrics", "--enable-cache-report"]
    return args + list(model.extra_args)


def launch_env(model: ModelProfile, role: Role) -> dict[str, str]:
    """``/health`` without a generation (:data:`HEALTH_GENERATION_ENV`), the Mooncake store's variables
    when HiCache keeps KV in one (:mod:`infctl.engines.kv_pool`), then the profile's ``env``."""
    return {HEALTH_GENERATION_ENV: "false", **kv_pool.client_env(model), **model.env}


def pod_ip_env(model: ModelProfile, role: Role) -> tuple[str, ...]:
    """A Mooncake store client's ``MOONCAKE_LOCAL_HOSTNAME`` (``localhost`` otherwise, which no peer can
    reach). SGLang's PD engines find their own address (the bootstrap server learns it from the prefill)."""
    return tuple(name for name in kv_pool.client_pod_ip_env(model) if name not in model.env)


def new_spelling(model: ModelProfile, old: str) -> str | None:
    """The new spelling of renamed flag ``old`` (:data:`RENAMED_FLAGS`) when the model's image (its
    ``image``, else :data:`IMAGE`) runs the release that brought it or a later one; None for the old
    spelling, also when the image's tag names no release (``latest``, a digest): the old spelling is the
    one every release so far accepts."""
    new, since = RENAMED_FLAGS[old]
    version = image_version(model.image or IMAGE)
    return new if version is not None and version >= since else None


def multinode_args(model: ModelProfile, *, nodes: int, gpus_per_node: int, leader: bool) -> MultiNodeArgs:
    """Flags that make ``nodes`` pods one replica: each pod is node ``$(LWS_WORKER_INDEX)`` of ``nodes``,
    meeting at the leader's ``--dist-init-addr``."""
    return MultiNodeArgs(
        (
            "--nnodes", str(nodes),
            "--node-rank", LWS_WORKER_INDEX,
            DIST_INIT_FLAG, f"{LWS_LEADER_ADDRESS}:{DIST_PORT}",
        )
    )  # fmt: skip


def host_port_runs(model: ModelProfile, role: Role = "both") -> dict[str, int]:
    """The ports an engine of ``model`` in ``role`` binds at a fixed default or at an offset from ``--port``,
    which engines side by side on one machine must each get their own of: name -> how many consecutive ports.

    A PD prefill engine listens on its ``--disaggregation-bootstrap-port`` (the profile's
    ``pd.bootstrap_port``, one value for every prefill engine: fine when each is a pod with its own IP, a
    collision when all are 127.0.0.1), so ``bootstrap`` gets one port; the router names it in each
    request's ``bootstrap_port``.
    With DP attention every internal socket is TCP at ``--dist-init-addr``'s port + 0..6 and + 13, and with
    no address SGLang derives that port from ``--port`` + 233, so two engines whose HTTP ports differ by
    less than 14 overlap: ``dist_init`` gets its own run of 14 (more with many ranks, see
    :data:`ZMQ_PORTS_AFTER_DIST_INIT`). Plain ``--dp-size`` needs none: its ranks talk over IPC and pick
    their NCCL ports free (a fixed ``--nccl-port`` or ``--dist-init-addr`` would be shared by every rank).
    A flag already in ``extra_args`` is the user's choice.
    """
    given = {word.split("=", 1)[0] for word in model.extra_args}
    runs: dict[str, int] = {}
    if role == "prefill" and model.pd is not None and BOOTSTRAP_FLAG not in given:
        runs["bootstrap"] = 1
    dp = model.data_parallel_size
    if dp > 1 and model.dp_attention and DIST_INIT_FLAG not in given:
        runs["dist_init"] = max(HANDSHAKE_DELTA + 1, ZMQ_PORTS_AFTER_DIST_INIT + 1 + dp)
    return runs


def host_port_args(ports: Mapping[str, int], host: str) -> list[str]:
    """The flags passing the ports :func:`host_port_runs` asked for (each run's first port under its name).

    ``bootstrap`` has none here: it travels as the model's ``pd.bootstrap_port``, which :func:`launch_command`
    already passes (the local planner gives each prefill engine a model with its own)."""
    return [DIST_INIT_FLAG, f"{host}:{ports['dist_init']}"] if "dist_init" in ports else []


def host_port_env(ports: Mapping[str, int], host: str) -> dict[str, str]:
    """None: every port :func:`host_port_runs` asks for travels as a flag."""
    return {}


def _dp_args(model: ModelProfile) -> list[str]:
    dp = str(model.data_parallel_size)
    if not model.dp_attention:
        return ["--dp-size", dp]
    attn_dp = new_spelling(model, DP_ATTENTION_FLAG)
    return [attn_dp, dp] if attn_dp is not None else ["--dp-size", dp, DP_ATTENTION_FLAG]


def _pd_args(model: ModelProfile, role: Role) -> list[str]:
    if role == "both":
        return []
    pd = pd_section(model, role, "{transfer_backend: mooncake}")
    args = ["--disaggregation-mode", role, "--disaggregation-transfer-backend", pd.transfer_backend]
    if role == "prefill":
        args += [BOOTSTRAP_FLAG, str(pd.bootstrap_port)]
    if pd.ib_device:
        args += ["--disaggregation-ib-device", pd.ib_device]
    return args


def _speculative_args(model: ModelProfile) -> list[str]:
    spec = model.speculative
    if spec is None:
        return []
    n = spec.num_speculative_tokens
    if spec.method == "ngram":
        return ["--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens", str(n + 1)]
    # MTP is SGLang's EAGLE path over the model's own MTP layers (no draft path needed); a chain
    # (topk 1) of n steps verifies n + 1 tokens.
    args = ["--speculative-algorithm", "EAGLE"]
    if spec.draft_model is not None:
        args += ["--speculative-draft-model-path", spec.draft_model]
    args += ["--speculative-num-steps", str(n), "--speculative-eagle-topk", "1"]
    return [*args, "--speculative-num-draft-tokens", str(n + 1)]
