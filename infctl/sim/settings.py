"""Settings of ``infctl sim``: one frozen record the CLI builds and ``infctl.sim.server.serve`` runs.

Every field is documented with its unit and default. Profile values (``num_gpu_blocks`` ...) are
overrides: ``None`` keeps the value of the named ``infctl.sim.profiles`` profile.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from infctl.engines.vllm import DEV_MODE_ENV
from infctl.sim.faults import FaultPlan
from infctl.sim.offload import OffloadTier, WritePolicy
from infctl.telemetry.kv_events import KVEventEncoding

Personality = Literal["vllm", "sglang"]
Role = Literal["prefill", "decode", "both"]

DEFAULT_PORTS: dict[str, int] = {"vllm": 8000, "sglang": 30000}
"""The port each real engine listens on by default."""
SERVER_DEV_MODE_ENV = DEV_MODE_ENV
"""The variable :attr:`SimSettings.server_dev_mode` mirrors (vLLM's ``VLLM_SERVER_DEV_MODE``)."""


@dataclass(frozen=True)
class SimSettings:
    """How to run one or more simulated engines in this process."""

    personality: Personality = "vllm"
    """Which engine to imitate: HTTP extras, error bodies, metric names and the PD protocol."""
    profile: str = "llama3-8b-h100"
    """Name of the timing/capacity profile (``infctl.sim.profiles.PROFILES``)."""
    model: str | None = None
    """Served model name (``/v1/models``, ``model_name`` label); None: the profile's name."""
    tokenizer: str = "words"
    """How prompts become token ids (``infctl.tokenization.load_tokenizer``): ``words``, the simulator's
    whitespace words (the default); a model directory, ``tokenizer.json`` or Hugging Face id, to count,
    cache and publish prompt tokens as a real engine serving that model would (``usage.prompt_tokens``,
    cached tokens, ``/tokenize``, the context limit, KV events' token ids); ``estimate``. Generated tokens
    stay the simulator's words either way."""
    host: str = "127.0.0.1"
    """Address to listen on."""
    port: int | None = None
    """First instance's port; instance i listens on port + i. None: the engine's default
    (vLLM 8000, SGLang 30000); 0: a free port per instance (tests)."""
    instances: int = 1
    """Engines to run, one event loop, consecutive ports."""
    data_parallel_size: int = 1
    """Data-parallel ranks per instance behind its one port (vLLM --data-parallel-size, SGLang --dp-size);
    1: none."""
    roles: tuple[Role, ...] = ("both",)
    """PD role of each instance, cycled over the instances (``--role prefill,decode`` with two instances
    gives a PD pair in one process): ``prefill`` serves prefill legs, ``decode`` takes transferred KV,
    ``both`` is colocated."""
    time_scale: float = 1.0
    """Wall seconds per simulated second: 1.0 runs in real time, 0.1 ten times faster."""
    stream_interval: int = 1
    """Tokens coalesced into one SSE chunk (vLLM ``--stream-interval``); the first token is never held."""
    enable_request_id_headers: bool = False
    """vLLM ``--enable-request-id-headers``: every answer carries ``x-request-id`` (the client's, else a new
    one); without it a vLLM answer carries none (0.32's ``XRequestIdMiddleware``). SGLang always does."""
    kv_events_port: int | None = None
    """Publish vLLM-format KV events on ZMQ PUB ``tcp://*:port+i`` (with N data-parallel ranks, rank r of
    instance i on ``port + i*N + r``); None: off; 0: free ports (tests)."""
    kv_events_topic: str = ""
    """ZMQ topic frame of every KV event message (vLLM's default is empty)."""
    kv_events_encoding: KVEventEncoding = "map"
    """How each KV event is encoded: "map" (a map tagged under "type", what vLLM emits today and the only
    form vllm-router reads) or "array" (older vLLM's tagged arrays)."""
    faults: FaultPlan = field(default_factory=FaultPlan)
    """Faults active from start (``--fault``); change them at runtime through ``/admin/faults``."""
    legacy_metrics: bool = False
    """Also expose deprecated vLLM metric names (gpu_cache_usage_perc, gpu_prefix_cache_*, ...)."""
    server_dev_mode: bool = False
    """vLLM's ``VLLM_SERVER_DEV_MODE=1`` (``infctl sim`` reads that variable): serve vLLM's development
    endpoints, ``/reset_prefix_cache`` and ``/is_sleeping``; without it they answer 404, as vLLM 0.32's do.
    SGLang's ``/flush_cache`` needs nothing."""
    trust_request_chat_template: bool = False
    """vLLM ``--trust-request-chat-template``: render a chat request's own ``chat_template``; without it such
    a request is refused (400), as vLLM 0.32 refuses it. The simulator's words ignore any template."""
    max_default_tokens: int = 1024
    """Cap on the tokens a chat request generates when it gives no max_tokens (vLLM would use all of
    the remaining context)."""
    bootstrap_port: int = 8998
    """SGLang PD: instance i's bootstrap port is bootstrap_port + i (reported, never bound); a decode meets
    the prefill of its room at the ``bootstrap_port`` its request names (``BootstrapRegistry``)."""
    nixl_side_channel_port: int = 5600
    """vLLM PD: instance i's NIXL side-channel port is nixl_side_channel_port + i (vLLM's
    ``VLLM_NIXL_SIDE_CHANNEL_PORT``, default 5600; reported as ``remote_port``, never bound); a decode whose
    ``remote_port`` is a prefill instance's of this process checks ``remote_engine_id`` against it, as
    vLLM's NIXL handshake does."""
    pd_wait_timeout: float = 30.0
    """SGLang PD: wall seconds a decode request waits for its in-process prefill before failing."""
    num_gpu_blocks: int | None = None
    """Profile override: KV blocks in the pool."""
    block_size: int | None = None
    """Profile override: tokens per KV block."""
    max_num_seqs: int | None = None
    """Profile override: most sequences in one batch."""
    max_num_batched_tokens: int | None = None
    """Profile override: most tokens (prefill + decode) in one step."""
    max_model_len: int | None = None
    """Profile override: context length (prompt + generated tokens)."""
    enable_prefix_caching: bool | None = None
    """Profile override: False disables the prefix cache (``--no-prefix-caching``)."""
    kv_offloading_size: float | None = None
    """Second KV tier in host memory, GiB per instance (vLLM ``--kv-offloading-size``, SGLang
    ``--hicache-size``); None: HBM only."""
    kv_offloading_gbps: float = OffloadTier.load_gbps
    """Bandwidth between HBM and the tier, GB/s in each direction (50: PCIe 5.0 x16)."""
    kv_offloading_write_policy: WritePolicy = "write_through"
    """``write_through`` copies every computed block (vLLM, SGLang's default); ``write_back`` only evicted
    ones (SGLang ``--hicache-write-policy write_back``)."""

    def offload_tier(self) -> OffloadTier | None:
        """The tier each instance's engine core gets, or None."""
        if self.kv_offloading_size is None:
            return None
        return OffloadTier(
            capacity_gib=self.kv_offloading_size,
            load_gbps=self.kv_offloading_gbps,
            store_gbps=self.kv_offloading_gbps,
            write_policy=self.kv_offloading_write_policy,
        )

    def profile_overrides(self) -> dict[str, object]:
        """The profile fields given explicitly, for ``SimProfile.with_overrides``."""
        values = {
            "num_gpu_blocks": self.num_gpu_blocks,
            "block_size": self.block_size,
            "max_num_seqs": self.max_num_seqs,
            "max_num_batched_tokens": self.max_num_batched_tokens,
            "max_model_len": self.max_model_len,
            "enable_prefix_caching": self.enable_prefix_caching,
        }
        return {k: v for k, v in values.items() if v is not None}

    def role_of(self, index: int) -> Role:
        return self.roles[index % len(self.roles)]

    @property
    def first_port(self) -> int:
        return DEFAULT_PORTS[self.personality] if self.port is None else self.port
