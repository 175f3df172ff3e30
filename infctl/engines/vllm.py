"""vLLM (v0.11+): metric names, signals, health and load endpoints; the command line (and the releases
that accept it) is :mod:`infctl.engines.vllm_launch`, the PD protocol :mod:`infctl.engines.vllm_pd`, the
``/load`` body and the cache-config labels :mod:`infctl.engines.vllm_load`.

Metric names are module constants so the simulator's vLLM personality, doctor and dashboards import
them instead of spelling them. Every sample carries the labels ``model_name`` and ``engine`` (the
data-parallel engine index); counters end in ``_total``; histogram constants are family names.

Data parallel (``--data-parallel-size N`` behind one API server): ``PrometheusStatLogger`` writes one
series per engine core (``engine="0"`` .. ``engine="N-1"``) in every family, and the OpenAI routes read
the ``X-data-parallel-rank`` header (``OpenAIServing._get_data_parallel_rank``: case-insensitive, a
non-integer is ignored) and hand it to the engine client, which then skips its own least-loaded pick; a
rank outside ``[0, N)`` fails the request. Tensor-parallel workers export nothing themselves, so a TP>1
engine has no per-TP-rank copies of a series to collapse (SGLang's schedulers do: ``sglang.per_rank``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from infctl.engines import vllm_launch, vllm_load, vllm_pd
from infctl.engines.base import (
    Body,
    CacheReset,
    Diagnostics,
    HealthSpec,
    MultiNodeArgs,
    PDEndpoint,
    PDStyle,
    ProfileRules,
    RankPin,
    Role,
    SignalCheck,
    SignalMetrics,
)
from infctl.telemetry.prometheus import MetricFamilies, label_values, mean_value, value
from infctl.telemetry.signals import EngineSignals, LoadReport

if TYPE_CHECKING:
    from infctl.config.model import ModelProfile

NAME: Final = "vllm"
MODEL_NAME_LABEL = "model_name"
ENGINE_LABEL = "engine"

# Gauges.
NUM_REQUESTS_RUNNING = "vllm:num_requests_running"
NUM_REQUESTS_WAITING = "vllm:num_requests_waiting"
NUM_REQUESTS_WAITING_BY_REASON = "vllm:num_requests_waiting_by_reason"
"""Label ``reason``: ``capacity`` or ``deferred``."""
KV_CACHE_USAGE_PERC = "vllm:kv_cache_usage_perc"
"""A fraction 0..1 despite the name."""
CACHE_CONFIG_INFO = "vllm:cache_config_info"
"""Value 1; every cache-config field is a label (block_size, num_gpu_blocks, enable_prefix_caching, ...)."""
LORA_REQUESTS_INFO = "vllm:lora_requests_info"
"""Labels max_lora, running_lora_adapters, waiting_lora_adapters."""

# Counters (sample names, with ``_total``).
PREFIX_CACHE_QUERIES = "vllm:prefix_cache_queries_total"
"""Prompt tokens looked up in the prefix cache."""
PREFIX_CACHE_HITS = "vllm:prefix_cache_hits_total"
"""Prompt tokens found in the prefix cache."""
PROMPT_TOKENS = "vllm:prompt_tokens_total"
GENERATION_TOKENS = "vllm:generation_tokens_total"
NUM_PREEMPTIONS = "vllm:num_preemptions_total"
REQUEST_SUCCESS = "vllm:request_success_total"
"""Label ``finished_reason``: stop, length, abort."""

# Histograms (family names; samples are ``<name>_bucket{le=...}``, ``_sum``, ``_count``).
TIME_TO_FIRST_TOKEN = "vllm:time_to_first_token_seconds"
INTER_TOKEN_LATENCY = "vllm:inter_token_latency_seconds"
REQUEST_TIME_PER_OUTPUT_TOKEN = "vllm:request_time_per_output_token_seconds"
E2E_REQUEST_LATENCY = "vllm:e2e_request_latency_seconds"
REQUEST_QUEUE_TIME = "vllm:request_queue_time_seconds"
REQUEST_PREFILL_TIME = "vllm:request_prefill_time_seconds"
REQUEST_DECODE_TIME = "vllm:request_decode_time_seconds"
REQUEST_INFERENCE_TIME = "vllm:request_inference_time_seconds"
"""Time in the RUNNING phase (prefill + decode)."""
REQUEST_PROMPT_TOKENS = "vllm:request_prompt_tokens"
REQUEST_GENERATION_TOKENS = "vllm:request_generation_tokens"
REQUEST_PARAMS_MAX_TOKENS = "vllm:request_params_max_tokens"
REQUEST_PARAMS_N = "vllm:request_params_n"
ITERATION_TOKENS = "vllm:iteration_tokens_total"
"""Tokens per engine step; a histogram despite the ``_total``."""

# Deprecated names still seen in the field; read as fallbacks only.
GPU_CACHE_USAGE_PERC = "vllm:gpu_cache_usage_perc"
GPU_PREFIX_CACHE_QUERIES = "vllm:gpu_prefix_cache_queries_total"
"""Counted KV *blocks* (v0.8), not tokens."""
GPU_PREFIX_CACHE_HITS = "vllm:gpu_prefix_cache_hits_total"
TIME_PER_OUTPUT_TOKEN = "vllm:time_per_output_token_seconds"

GAUGES = (
    NUM_REQUESTS_RUNNING,
    NUM_REQUESTS_WAITING,
    NUM_REQUESTS_WAITING_BY_REASON,
    KV_CACHE_USAGE_PERC,
    CACHE_CONFIG_INFO,
    LORA_REQUESTS_INFO,
)
COUNTERS = (
    PREFIX_CACHE_QUERIES,
    PREFIX_CACHE_HITS,
    PROMPT_TOKENS,
    GENERATION_TOKENS,
    NUM_PREEMPTIONS,
    REQUEST_SUCCESS,
)
HISTOGRAMS = (
    TIME_TO_FIRST_TOKEN,
    INTER_TOKEN_LATENCY,
    REQUEST_TIME_PER_OUTPUT_TOKEN,
    E2E_REQUEST_LATENCY,
    REQUEST_QUEUE_TIME,
    REQUEST_PREFILL_TIME,
    REQUEST_DECODE_TIME,
    REQUEST_INFERENCE_TIME,
    REQUEST_PROMPT_TOKENS,
    REQUEST_GENERATION_TOKENS,
    REQUEST_PARAMS_MAX_TOKENS,
    REQUEST_PARAMS_N,
    ITERATION_TOKENS,
)
DEPRECATED = (GPU_CACHE_USAGE_PERC, GPU_PREFIX_CACHE_QUERIES, GPU_PREFIX_CACHE_HITS, TIME_PER_OUTPUT_TOKEN)
METRIC_NAMES = GAUGES + COUNTERS + HISTOGRAMS
"""Every current name vLLM emits that infctl knows (histograms as family names)."""

TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)  # fmt: skip
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
               20.0, 40.0, 80.0)  # fmt: skip
"""Also the buckets of request_time_per_output_token_seconds."""
REQUEST_LATENCY_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
                           120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)  # fmt: skip
"""Buckets of e2e, queue, inference, prefill and decode time."""
ITERATION_TOKENS_BUCKETS = (1.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0,
                            16384.0)  # fmt: skip
REQUEST_PARAMS_N_BUCKETS = (1.0, 2.0, 5.0, 10.0, 20.0)
TIME_BUCKETS = {
    TIME_TO_FIRST_TOKEN: TTFT_BUCKETS,
    INTER_TOKEN_LATENCY: ITL_BUCKETS,
    REQUEST_TIME_PER_OUTPUT_TOKEN: ITL_BUCKETS,
    E2E_REQUEST_LATENCY: REQUEST_LATENCY_BUCKETS,
    REQUEST_QUEUE_TIME: REQUEST_LATENCY_BUCKETS,
    REQUEST_INFERENCE_TIME: REQUEST_LATENCY_BUCKETS,
    REQUEST_PREFILL_TIME: REQUEST_LATENCY_BUCKETS,
    REQUEST_DECODE_TIME: REQUEST_LATENCY_BUCKETS,
}
"""Bucket bounds of every time histogram. Token-count histograms (request_prompt_tokens,
request_generation_tokens, request_params_max_tokens) use ``token_buckets(max_model_len)``."""


def token_buckets(max_model_len: int) -> tuple[float, ...]:
    """1, 2, 5, 10, 20, 50, ... up to ``max_model_len``: request_prompt/generation_tokens buckets."""
    out: list[float] = []
    scale = 1
    while True:
        for m in (1, 2, 5):
            if m * scale > max_model_len:
                return tuple(out)
            out.append(float(m * scale))
        scale *= 10


def bucket_bounds(max_model_len: int) -> dict[str, tuple[float, ...]]:
    """Bucket bounds of every histogram in HISTOGRAMS, for an engine with this context length."""
    tokens = token_buckets(max_model_len)
    return {
        **TIME_BUCKETS,
        REQUEST_PROMPT_TOKENS: tokens,
        REQUEST_GENERATION_TOKENS: tokens,
        REQUEST_PARAMS_MAX_TOKENS: tokens,
        REQUEST_PARAMS_N: REQUEST_PARAMS_N_BUCKETS,
        ITERATION_TOKENS: ITERATION_TOKENS_BUCKETS,
    }


DP_RANK_HEADER = "x-data-parallel-rank"
"""Pins a request to one data-parallel engine core (read case-insensitively by the API server)."""
_SIGNAL_GAUGES = (NUM_REQUESTS_WAITING, NUM_REQUESTS_RUNNING, KV_CACHE_USAGE_PERC)
_SIGNAL_COUNTERS = (
    PREFIX_CACHE_QUERIES,
    PREFIX_CACHE_HITS,
    PROMPT_TOKENS,
    GENERATION_TOKENS,
    NUM_PREEMPTIONS,
)
_DEPRECATED_PREFIX = (
    (GPU_PREFIX_CACHE_QUERIES, GPU_PREFIX_CACHE_HITS),
    # prometheus_client adds _total; a hand-rolled exporter of the v0.8 names may not have.
    (GPU_PREFIX_CACHE_QUERIES.removesuffix("_total"), GPU_PREFIX_CACHE_HITS.removesuffix("_total")),
)

DIAGNOSTICS = Diagnostics(
    signals=(
        SignalCheck("queue", (NUM_REQUESTS_WAITING,), "router, autoscaler"),
        SignalCheck("running", (NUM_REQUESTS_RUNNING,), "router, autoscaler"),
        SignalCheck("KV usage", (KV_CACHE_USAGE_PERC, GPU_CACHE_USAGE_PERC), "router, autoscaler"),
        SignalCheck("cache config", (CACHE_CONFIG_INFO,), "router (prefix index size), doctor", False),
        SignalCheck(
            "prefix hits",
            (PREFIX_CACHE_HITS, *(hits for _, hits in _DEPRECATED_PREFIX)),
            "router, bench",
            False,
        ),
        SignalCheck("prompt tokens", (PROMPT_TOKENS,), "router, bench", False),
    ),
    deprecated=DEPRECATED,
    deprecated_fix=(
        "drop --show-hidden-metrics-for-version from the vLLM command line, and move dashboards and "
        "alerts to the current names (vllm:kv_cache_usage_perc, vllm:prefix_cache_*_total)"
    ),
    prefix_caching_fix="start vLLM with --enable-prefix-caching (and without --no-enable-prefix-caching)",
)

SIGNAL_METRICS = SignalMetrics(
    queue=NUM_REQUESTS_WAITING,
    running=NUM_REQUESTS_RUNNING,
    kv_usage=KV_CACHE_USAGE_PERC,
    ttft=TIME_TO_FIRST_TOKEN,
    ttft_buckets=TTFT_BUCKETS,
    itl=INTER_TOKEN_LATENCY,
    e2e=E2E_REQUEST_LATENCY,
    prompt_tokens=PROMPT_TOKENS,
    generation_tokens=GENERATION_TOKENS,
    model_label=MODEL_NAME_LABEL,
)
DEV_MODE_ENV = "VLLM_SERVER_DEV_MODE"
"""Set to 1, vLLM registers its development endpoints: ``/reset_prefix_cache``, ``/reset_mm_cache``,
``/reset_encoder_cache``, ``/sleep``, ``/wake_up``, ``/is_sleeping``, ``/collective_rpc``,
``/server_info`` ... (0.32: ``entrypoints/launchers/api_server/routers.py`` calls
``register_vllm_dev_api_routers``, ``entrypoints/serve/dev/``, only under it; without it they answer 404).
vLLM logs a security warning for it: they are not for production."""
CACHE_RESET = CacheReset(
    path="/reset_prefix_cache",
    env={DEV_MODE_ENV: "1"},
    absent_fix=(
        f"start vLLM with {DEV_MODE_ENV}=1 in its environment (a profile: model.env, e.g. --set "
        f"model.env.{DEV_MODE_ENV}=1); vLLM serves /reset_prefix_cache only in dev mode, whose endpoints are "
        "not for production: use it on engines you benchmark"
    ),
    # 0.32 answers 200 {"success": false} while running requests (or KV transfers) hold blocks
    # (entrypoints/serve/dev/cache/api_router.py); with data parallelism, false unless every engine core
    # reset (core_client.AsyncMPClient.reset_prefix_cache_async).
    success_key="success",
)
"""vLLM's prefix-cache reset: ``POST /reset_prefix_cache``, only in dev mode (:data:`DEV_MODE_ENV`)."""

PROFILE_RULES = ProfileRules(
    pd_fields=frozenset({"kv_connector", "ib_device"}),
    pd_hint="vLLM picks its transfer through pd.kv_connector",
    offload_backends=("native", "lmcache"),
    refused_kv_connectors=vllm_launch.REFUSED_KV_CONNECTORS,
    dp_attention_hint="vLLM runs data-parallel attention whenever data_parallel_size > 1",
)


class VLLMAdapter:
    """The vLLM adapter (stateless; use the module's ``ADAPTER``)."""

    name = NAME
    metrics_path = "/metrics"
    metrics_hint = "check that vLLM is up on that port (its API server serves /metrics by default)"
    wanted_metrics = frozenset(
        (
            *_SIGNAL_GAUGES,
            *_SIGNAL_COUNTERS,
            CACHE_CONFIG_INFO,
            GPU_CACHE_USAGE_PERC,
            *(n for pair in _DEPRECATED_PREFIX for n in pair),
        )
    )
    health = HealthSpec(path="/health", fatal_statuses=(503,))
    """vLLM listens only once the model is loaded (refused = starting); 503 means the engine died."""
    load_paths = ("/load",)
    """Only with ``--enable-server-load-tracking`` (which launch_command always passes)."""
    cache_reset = CACHE_RESET
    pd_style: PDStyle = "sequential"
    decode_serves_alone = True
    """A kv_consumer engine given no ``kv_transfer_params`` prefills the prompt itself (the connector only
    loads KV a request names), so a short prompt may skip the prefill engine."""
    dp_rank_header: str | None = DP_RANK_HEADER
    dp_rank_label = ENGINE_LABEL
    rank_capacity_is_engine_total = True
    """Every engine core's ``cache_config_info`` carries all their pools (:func:`vllm_load.cache_config`)."""
    default_image = vllm_launch.IMAGE
    flag_versions = vllm_launch.FLAG_VERSIONS
    oldest_checked = vllm_launch.OLDEST_CHECKED
    diagnostics = DIAGNOSTICS
    signal_metrics = SIGNAL_METRICS
    profile_rules = PROFILE_RULES

    def signals(self, families: MetricFamilies) -> EngineSignals:
        deprecated: list[str] = []
        # Each engine core's usage is of its own pool: their mean (as vLLM's own aggregate log,
        # v1/metrics/loggers.py:418) times all their pools (the capacity) is the tokens held, pools equal.
        if KV_CACHE_USAGE_PERC in families:
            kv_usage = mean_value(families, KV_CACHE_USAGE_PERC)
        else:
            kv_usage = mean_value(families, GPU_CACHE_USAGE_PERC)
            if GPU_CACHE_USAGE_PERC in families:
                deprecated.append(GPU_CACHE_USAGE_PERC)
        capacity, block_size, prefix_caching = vllm_load.cache_config(families.get(CACHE_CONFIG_INFO, ()))
        queries, hits = value(families, PREFIX_CACHE_QUERIES), value(families, PREFIX_CACHE_HITS)
        if PREFIX_CACHE_QUERIES not in families:
            for q_name, h_name in _DEPRECATED_PREFIX:
                if q_name in families:
                    scale = block_size or 1  # blocks -> tokens; the hit rate is right either way
                    queries = value(families, q_name) * scale
                    hits = value(families, h_name) * scale
                    deprecated += [q_name, h_name]
                    break
        return EngineSignals(
            queue=value(families, NUM_REQUESTS_WAITING),
            running=value(families, NUM_REQUESTS_RUNNING),
            kv_usage=kv_usage,
            prefix_queries=queries,
            prefix_hits=hits,
            prompt_tokens=value(families, PROMPT_TOKENS),
            generation_tokens=value(families, GENERATION_TOKENS),
            preemptions=value(families, NUM_PREEMPTIONS),
            cache_capacity_tokens=capacity,
            block_size=block_size,
            prefix_caching=prefix_caching,
            model_names=label_values(families, self.wanted_metrics, MODEL_NAME_LABEL),
            deprecated=tuple(deprecated),
        )

    def pin_rank(self, rank: int) -> RankPin:
        """The ``x-data-parallel-rank`` header alone: the body goes through untouched."""
        return RankPin(headers={DP_RANK_HEADER: str(rank)})

    def dp_ranks(self, model: ModelProfile, role: Role) -> int:
        """As vLLM resolves the command line (:func:`~infctl.engines.vllm_launch.dp_ranks`): ``-dp`` in
        ``extra_args`` overrides the profile's, external or hybrid load balancing fronts fewer ranks."""
        return vllm_launch.dp_ranks(vllm_launch.launch_command(model, role=role, port=0))

    def reported_dp_ranks(self, info: object) -> int | None:
        """None: vLLM serves ``/server_info`` only in dev mode (``VLLM_SERVER_DEV_MODE=1``), and its PD needs
        no rank count."""
        return None

    def parse_load(self, body: object) -> LoadReport:
        return vllm_load.parse_load(body)

    def prefill_body(
        self, body: Mapping[str, Any], prefill: PDEndpoint, room: int | Sequence[int] | None = None
    ) -> Body:
        return vllm_pd.prefill_body(body)

    def decode_body(
        self,
        body: Mapping[str, Any],
        prefill_response: Mapping[str, Any] | None,
        prefill: PDEndpoint,
        room: int | Sequence[int] | None = None,
    ) -> Body:
        return vllm_pd.decode_body(body, prefill_response, prefill)

    def launch_command(
        self, model: ModelProfile, *, role: Role, port: int, host: str = "0.0.0.0"
    ) -> list[str]:
        return vllm_launch.launch_command(model, role=role, port=port, host=host)

    def launch_env(self, model: ModelProfile, role: Role) -> dict[str, str]:
        return vllm_launch.launch_env(model, role)

    def pod_ip_env(self, model: ModelProfile, role: Role) -> tuple[str, ...]:
        return vllm_launch.pod_ip_env(model, role)

    def multinode_args(
        self, model: ModelProfile, *, nodes: int, gpus_per_node: int, leader: bool
    ) -> MultiNodeArgs:
        return vllm_launch.multinode_args(model, nodes=nodes, gpus_per_node=gpus_per_node, leader=leader)

    def host_port_runs(self, model: ModelProfile, role: Role) -> dict[str, int]:
        return vllm_launch.host_port_runs(model, role)

    def host_port_args(self, ports: Mapping[str, int], host: str) -> list[str]:
        return vllm_launch.host_port_args(ports, host)

    def host_port_env(self, ports: Mapping[str, int], host: str) -> dict[str, str]:
        return vllm_launch.host_port_env(ports, host)


ADAPTER = VLLMAdapter()
