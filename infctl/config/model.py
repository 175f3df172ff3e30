"""The model profile: which weights, which engine, and how the engine is configured.

Fields describe intent in engine-neutral terms; ``infctl.engines`` turns them into each engine's flags.
Parallelism is counted the same way for both engines: a replica runs ``data_parallel_size`` ranks of
``tensor_parallel_size`` GPUs each, so it needs ``tensor_parallel_size * data_parallel_size`` GPUs.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, model_validator

from infctl.config._base import Count, Port, Problem, ProfileModel, check_name, raise_problems
from infctl.config._engine import EngineName as EngineName
from infctl.config.kv_pool import KVDiskTier, KVPoolConfig, pool_problems
from infctl.engines import ENGINES, get_adapter


class PDConfig(ProfileModel):
    """How a prefill engine hands the KV cache to a decode engine (used in group and pool modes)."""

    kv_connector: Literal["nixl", "mooncake", "p2pnccl", "lmcache"] = "nixl"
    """vLLM only: the KV connector, NixlConnector (the default and the one the router drives). ``p2pnccl``,
    ``mooncake`` and ``lmcache`` are refused with the reason and the fix
    (:data:`infctl.engines.vllm_launch.REFUSED_KV_CONNECTORS`)."""
    transfer_backend: Literal["mooncake", "nixl"] = "mooncake"
    """SGLang only: ``--disaggregation-transfer-backend``. Default mooncake."""
    bootstrap_port: Port = 8998
    """SGLang only: ``--disaggregation-bootstrap-port`` on prefill servers. Default 8998."""
    ib_device: str | None = None
    """RDMA devices for KV transfer, e.g. ``mlx5_0,mlx5_1`` (SGLang ``--disaggregation-ib-device``; vLLM
    passes it to UCX as ``UCX_NET_DEVICES``). Default None: the transport picks."""


class KVOffloadConfig(ProfileModel):
    """A second KV-cache tier in host memory (or a storage backend) behind the GPU cache."""

    backend: Literal["native", "lmcache", "hicache"]
    """native or lmcache (vLLM ``--kv-offloading-backend``);
    hicache (SGLang ``--enable-hierarchical-cache``)."""
    size_gib: float = Field(gt=0)
    """Host memory for offloaded KV per engine rank, in GiB (vLLM ``--kv-offloading-size``,
    SGLang ``--hicache-size``)."""
    storage_backend: str | None = None
    """A shared tier behind host memory: hicache ``mooncake`` (``--hicache-storage-backend``; SGLang's other
    storage backends pass through unchecked), lmcache ``lmcache`` (an LMCache server). ``mooncake`` and
    ``lmcache`` need ``pool``. Default None."""
    pool: KVPoolConfig | None = None
    """Where the shared tier's servers are: rendered by infctl or running already
    (:class:`~infctl.config.kv_pool.KVPoolConfig`). Required by ``mooncake`` and ``lmcache``. Default None."""
    disk: KVDiskTier | None = None
    """A disk tier on each engine's node (Mooncake SSD offload, LMCache local disk). Default None."""


class SpeculativeConfig(ProfileModel):
    """Speculative decoding."""

    method: Literal["mtp", "eagle", "ngram"]
    """mtp: the model's own multi-token-prediction layers (DeepSeek, Kimi); eagle: a separate draft model;
    ngram: prompt lookup, no draft model."""
    num_speculative_tokens: Count = 1
    """Tokens proposed per step. Default 1."""
    draft_model: str | None = None
    """HF id or path of the draft model; required for eagle, optional for mtp, not allowed for ngram."""


class KVEventsConfig(ProfileModel):
    """KV-cache events (blocks stored/removed) published over ZMQ for a cache-aware router."""

    enabled: bool = True
    """Publish events. Default true (the section's presence is the opt-in)."""
    port: Port = 5557
    """ZMQ PUB port the engine binds (``tcp://*:<port>``). Default 5557."""
    topic: str = "kv@$POD_IP@$MODEL"
    """Topic prefix; ``$POD_IP`` and ``$MODEL`` are substituted at launch so a subscriber can tell
    publishers apart. Default ``kv@$POD_IP@$MODEL``."""


class SimSettings(ProfileModel):
    """The simulated engine standing in for this model on the local target."""

    profile: Annotated[str, AfterValidator(check_name)]
    """Simulator timing profile, e.g. ``llama3-8b-h100`` (step-time coefficients and KV size)."""
    num_gpu_blocks: Count | None = None
    """KV blocks per engine. Default None: the simulator profile's value."""
    block_size: Count | None = None
    """Tokens per KV block. Default None: the simulator profile's value (16)."""
    max_num_seqs: Count | None = None
    """Largest running batch, in sequences. Default None: the simulator profile's value."""
    speedup: float = Field(default=1.0, gt=0)
    """Simulated seconds per wall-clock second: 10 runs ten times faster than the real engine (the sim's
    ``--time-scale`` is the inverse, wall seconds per simulated second). Default 1.0."""
    tokenizer: str = Field(default="words", min_length=1)
    """How the simulated engines turn prompts into token ids (``infctl sim --tokenizer``): ``words``, the
    simulator's whitespace words; a model directory, ``tokenizer.json`` or Hugging Face id, to count, cache
    and publish prompt tokens as a real engine serving that model would (Chinese and code included);
    ``estimate``. The local router counts and hashes prompts with the same one. Default ``words``."""


class ModelProfile(ProfileModel):
    """A model served by one engine, with every engine setting infctl manages."""

    engine: EngineName
    """Inference engine: vllm or sglang (any engine registered in :data:`infctl.engines.ENGINES`)."""
    model: str = Field(min_length=1)
    """Hugging Face model id (``Qwen/Qwen3-8B``) or a path inside the container."""
    tokenizer: str | None = None
    """Tokenizer the router and ``bench`` count prompts with: a model directory, a tokenizer.json or a
    Hugging Face id. Default None: the model's own (``model``)."""
    served_model_name: str = Field(default="", min_length=1)
    """Name clients put in ``"model"``. Default: the value of ``model``."""
    image: str | None = None
    """Container image. Default None: the engine adapter's pinned image."""
    tensor_parallel_size: Count = 1
    """GPUs per data-parallel rank. Default 1."""
    data_parallel_size: Count = 1
    """Data-parallel ranks in one replica (may span nodes). Default 1."""
    dp_attention: bool = False
    """SGLang only: the ranks share one TP group with data-parallel attention (``--tp-size`` =
    tensor_parallel_size * data_parallel_size; ``--dp-size N --enable-dp-attention``, or ``--attn-dp-size N``
    for images of sglang 0.5.22 and later). Default false."""
    expert_parallel: bool = False
    """Shard MoE experts across all ranks of the replica instead of tensor-slicing them. Default false."""
    enable_eplb: bool = False
    """Rebalance hot experts across ranks at run time; needs expert_parallel. Default false."""
    max_model_len: Count | None = None
    """Longest context (prompt + output) in tokens. Default None: the model's own limit."""
    enable_prefix_caching: bool = True
    """Reuse KV blocks of shared prompt prefixes (SGLang: radix cache). Default true."""
    gpu_memory_utilization: float | None = Field(default=None, gt=0, le=1)
    """Fraction of GPU memory the engine may use, 0..1 (SGLang ``--mem-fraction-static``).
    Default None: the engine's default."""
    pd: PDConfig | None = None
    """KV transfer settings; required when the deployment disaggregates (group or pool mode), ignored in
    aggregated mode. Default None."""
    kv_offload: KVOffloadConfig | None = None
    """Host-memory KV tier. Default None: GPU cache only."""
    speculative: SpeculativeConfig | None = None
    """Speculative decoding. Default None: off."""
    kv_events: KVEventsConfig | None = None
    """KV-cache events for the router. Default None: off."""
    extra_args: list[str] = Field(default_factory=list)
    """Extra engine command-line arguments, appended verbatim after the ones infctl generates."""
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment variables for the engine container or process."""
    sim: SimSettings | None = None
    """Simulated engine for the local target; required when the local target simulates. Default None."""

    @model_validator(mode="before")
    @classmethod
    def _default_served_name(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("served_model_name") is None and "model" in data:
            data = {**data, "served_model_name": data["model"]}
        return data

    @property
    def gpus_per_replica(self) -> int:
        """GPUs one engine replica occupies: tensor_parallel_size * data_parallel_size."""
        return self.tensor_parallel_size * self.data_parallel_size

    @model_validator(mode="after")
    def _check_engine_specific(self) -> ModelProfile:
        raise_problems([*self._pd_problems(), *self._offload_problems(), *self._parallel_problems()])
        return self

    def _pd_problems(self) -> list[Problem]:
        """Another engine's ``pd`` fields set, and a KV connector the engine refuses (its adapter's rules)."""
        pd = self.pd
        if pd is None:
            return []
        rules = get_adapter(self.engine).profile_rules
        problems = [
            Problem(
                ("pd", key),
                f"only meaningful for {_engines_reading(key)}, found it set with engine {self.engine!r}",
                hint=rules.pd_hint,
            )
            for key in PDConfig.model_fields
            if key in pd.model_fields_set and key not in rules.pd_fields
        ]
        refused = rules.refused_kv_connectors.get(pd.kv_connector)
        if refused is not None:
            why, fix = refused
            problems.append(Problem(("pd", "kv_connector"), f"{pd.kv_connector!r}: {why}", hint=fix))
        return problems

    def _offload_problems(self) -> list[Problem]:
        off = self.kv_offload
        if off is None:
            return []
        allowed = get_adapter(self.engine).profile_rules.offload_backends
        problems = []
        if off.backend not in allowed:
            expected = " or ".join(repr(b) for b in allowed)
            problems.append(
                Problem(
                    ("kv_offload", "backend"),
                    f"expected {expected} with engine {self.engine!r}, found {off.backend!r}",
                )
            )
        if off.backend not in allowed:
            return problems
        found = pool_problems(off.backend, off.storage_backend, off.pool, off.disk)
        return problems + [
            Problem(
                ("kv_offload", *p.loc), p.message, p.hint, ("kv_offload", *p.anchor) if p.anchor else None
            )
            for p in found
        ]

    def _parallel_problems(self) -> list[Problem]:
        problems = []
        rules = get_adapter(self.engine).profile_rules
        if self.dp_attention and not rules.dp_attention:
            with_switch = [name for name, a in ENGINES.items() if a.profile_rules.dp_attention]
            problems.append(
                Problem(
                    ("dp_attention",),
                    f"only meaningful for {' or '.join(with_switch) or 'no engine infctl knows'}",
                    hint=rules.dp_attention_hint,
                )
            )
        if self.enable_eplb and not self.expert_parallel:
            problems.append(
                Problem(("enable_eplb",), "needs expert_parallel: true, found expert_parallel: false")
            )
        spec = self.speculative
        if spec is not None and spec.method == "eagle" and spec.draft_model is None:
            problems.append(
                Problem(
                    ("speculative", "draft_model"),
                    "expected the draft model's HF id or path for method 'eagle', found nothing",
                )
            )
        if spec is not None and spec.method == "ngram" and spec.draft_model is not None:
            problems.append(Problem(("speculative", "draft_model"), "not used by method 'ngram'; remove it"))
        return problems


def _engines_reading(pd_field: str) -> str:
    """The engines whose adapters read ``pd.<pd_field>``: ``sglang``, ``sglang or vllm``."""
    readers = [name for name, a in ENGINES.items() if pd_field in a.profile_rules.pd_fields]
    return " or ".join(readers) or "no engine infctl knows"
