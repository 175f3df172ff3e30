"""The simulated vLLM's ``/metrics``: the families infctl reads (names from ``infctl.engines.vllm``), those
it reads none of, rendered so the simulated vLLM lists the families the real one does
(tests/e2e/test_vllm_real.py compares the two lists on the CPU build), and ``vllm:cache_config_info``'s
labels.

Names, types, labels and help are vLLM 0.32's (``vllm/v1/metrics/loggers.py`` ``PrometheusStatLogger``;
buckets ``vllm/v1/metrics/buckets.py``). Left out, as ``LEFT_OUT`` says: what needs a GPU's figures.
"""

from __future__ import annotations

from infctl.engines import vllm as names
from infctl.sim.personality.engine_view import Capacity, EngineView
from infctl.sim.settings import SimSettings
from infctl.sim.types import CoreStats, TierStats
from infctl.telemetry.exposition import Writer, label_pairs

REQUEST_MAX_NUM_GENERATION_TOKENS = "vllm:request_max_num_generation_tokens"
REQUEST_NUM_PREEMPTIONS = "vllm:request_num_preemptions"
REQUEST_PREFILL_KV_COMPUTED_TOKENS = "vllm:request_prefill_kv_computed_tokens"
NUM_PREEMPTIONS_BUCKETS = (1.0, 2.0, 3.0, 4.0, 5.0, 10.0, 20.0)
"""vLLM's ``REQUEST_NUM_PREEMPTIONS_BUCKETS``."""

EXTERNAL_PREFIX_CACHE_QUERIES = "vllm:external_prefix_cache_queries_total"
EXTERNAL_PREFIX_CACHE_HITS = "vllm:external_prefix_cache_hits_total"

HISTOGRAMS = (
    (names.REQUEST_PARAMS_N, "n", "Histogram of the n request parameter."),
    (REQUEST_MAX_NUM_GENERATION_TOKENS, "max_generation_tokens",
     "Histogram of maximum number of requested generation tokens."),
    (REQUEST_NUM_PREEMPTIONS, "num_preemptions", "Histogram of the number of times a request was preempted."),
    (REQUEST_PREFILL_KV_COMPUTED_TOKENS, "prefill_kv_computed",
     "Histogram of new KV tokens computed during prefill (excluding cached tokens)."),
)  # fmt: skip
"""(family, neutral histogram the driver observes, help) of the histograms beyond the adapter's."""

LEFT_OUT = (
    "vllm:estimated_flops_per_gpu_total",
    "vllm:estimated_read_bytes_per_gpu_total",
    "vllm:estimated_write_bytes_per_gpu_total",
)
"""Families vLLM 0.32 (CPU build) emits that the simulator does not: per-GPU FLOPs and memory traffic
estimates (``vllm/v1/metrics/perf.py``), from the model's architecture, which the simulator's profiles do not
describe."""

# KV offloading (``--kv-offloading-size``: vLLM 0.32's OffloadingConnector with its CPU spec), exposed only
# when the engine has a tier; names and help from vLLM's
# distributed/kv_transfer/kv_connector/v1/offloading/metrics.py (the total_* ones: its deprecated counters, by
# transfer_type, kept for the CPU spec). Its prefix-cache counters are in ``render_unread``.
KV_OFFLOAD_LOAD_BYTES = "vllm:kv_offload_load_bytes_total"
KV_OFFLOAD_STORE_BYTES = "vllm:kv_offload_store_bytes_total"
KV_OFFLOAD_LOAD_TIME = "vllm:kv_offload_load_time_total"
KV_OFFLOAD_STORE_TIME = "vllm:kv_offload_store_time_total"
KV_OFFLOAD_TOTAL_BYTES = "vllm:kv_offload_total_bytes_total"
KV_OFFLOAD_TOTAL_TIME = "vllm:kv_offload_total_time_total"
KV_OFFLOAD_CPU_CACHE_USAGE = "vllm:kv_offload_cpu_cache_usage_perc"

OFFLOAD_LEFT_OUT = (
    "vllm:kv_offload_load_size",
    "vllm:kv_offload_store_size",
    "vllm:kv_offload_size",
    "vllm:kv_offload_lookup_sync_delay_seconds",
    "vllm:kv_offload_lookup_async_delay_seconds",
    "vllm:kv_offload_allocation_failure_total",
    "vllm:kv_offload_cpu_allocation_size",
    "vllm:kv_offload_cpu_cache_write_usage_perc",
    "vllm:kv_offload_cpu_cache_read_usage_perc",
)
"""Families vLLM 0.32 exports with a CPU offload tier that the simulator does not: per-transfer sizes,
lookup delays, allocation failures and in-flight pins, which it does not record. Its
``kv_offload_cpu_cache_usage_perc`` differs too: vLLM's counts the chunks pinned by transfers in flight
(``v1/kv_offload/cpu/manager.py`` ``get_stats``: not evictable), the simulator's the blocks the tier
holds."""

_FINISH_REASONS = ("stop", "length", "abort", "error", "repetition")
"""vLLM 0.32's ``FinishReason``s: ``request_success_total`` has a series for each from the start."""

_WAITING_BY_REASON_HELP = (
    "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for scheduling capacity; "
    "'deferred' = deferred by transient constraints (LoRA budget, KV transfer, blocked status). "
    "Sum of all reasons equals vllm:num_requests_waiting."
)
"""vLLM 0.32's (``v1/metrics/loggers.py`` ``gauge_waiting_by_reason``)."""

_ALL_HISTOGRAMS = (
    (names.TIME_TO_FIRST_TOKEN, "ttft", "Histogram of time to first token in seconds."),
    (names.INTER_TOKEN_LATENCY, "itl", "Histogram of inter-token latency in seconds."),
    (names.REQUEST_TIME_PER_OUTPUT_TOKEN, "tpot", "Histogram of time_per_output_token_seconds per request."),
    (names.E2E_REQUEST_LATENCY, "e2e", "Histogram of e2e request latency in seconds."),
    (names.REQUEST_QUEUE_TIME, "queue", "Histogram of time spent in WAITING phase for request."),
    (names.REQUEST_INFERENCE_TIME, "inference", "Histogram of time spent in RUNNING phase for request."),
    (names.REQUEST_PREFILL_TIME, "prefill", "Histogram of time spent in PREFILL phase for request."),
    (names.REQUEST_DECODE_TIME, "decode", "Histogram of time spent in DECODE phase for request."),
    (names.REQUEST_PROMPT_TOKENS, "prompt_tokens", "Number of prefill tokens processed."),
    (names.REQUEST_GENERATION_TOKENS, "generation_tokens", "Number of generation tokens processed."),
    (names.ITERATION_TOKENS, "iteration_tokens", "Histogram of number of tokens per engine_step."),
    (names.REQUEST_PARAMS_MAX_TOKENS, "max_tokens", "Histogram of the max_tokens request parameter."),
    *HISTOGRAMS,
)
"""(family, neutral histogram, help) of every histogram rendered."""


def cache_config_info(cap: Capacity, settings: SimSettings, engine: str) -> dict[str, str]:
    """``vllm:cache_config_info``'s labels as vLLM 0.32 exports them: every ``CacheConfig`` attribute as
    ``str(value)`` (``config/cache.py`` ``metrics_info``: ``None``, ``True``, ``[]``, ``0.92``) plus
    ``engine`` (``v1/metrics/loggers.py`` ``log_metrics_info``), in name order as prometheus_client's
    multiprocess mode writes them (``mmap_dict.py`` ``json.dumps(sort_keys=True)``; seen on the CPU build).

    Values are a GPU engine's after start-up with default flags (``config/cache.py`` defaults): the engine
    core fills in ``num_gpu_blocks``, ``effective_attention_block_size`` and, for a full-attention model,
    ``kv_cache_max_concurrency`` = blocks / ceil(max_model_len / block_size) and ``kv_cache_size_tokens`` =
    int(that * max_model_len) (``v1/core/kv_cache_utils.py`` ``get_kv_cache_capacity``); the front end
    never learns ``hash_block_size`` or ``cache_hit_alignment_tokens`` (set in the worker's copy), so they
    stay ``None``. ``kv_cache_memory_bytes`` is None unless ``--kv-cache-memory-bytes`` (or the CPU build's
    ``VLLM_CPU_KVCACHE_SPACE``) is given, and ``mamba_ssm_cache_dtype`` is ``auto`` (the CPU build resets it
    to ``float32``). The simulator's ``--block-size`` stands for vLLM's (``user_specified_block_size``); its
    ``--num-gpu-blocks`` for the pool a GPU's memory gives, not ``--num-gpu-blocks-override``.

    With data parallelism every engine core's sample is the front end's one config: ``num_gpu_blocks`` summed
    over its engine cores (``v1/engine/core_client.py:851-855`` ``_apply_ready_response``, the ranks' equal
    pools here), ``kv_cache_size_tokens`` and ``kv_cache_max_concurrency`` one engine core's (``:862-872``,
    "do not sum across DP"), each written per ``engine`` (``v1/metrics/loggers.py:1133-1136``).
    """
    concurrency = cap.num_gpu_blocks / -(-cap.max_model_len // cap.block_size)
    offload = settings.kv_offloading_size
    values: dict[str, object] = {
        "block_size": cap.block_size, "user_specified_block_size": settings.block_size is not None,
        "kv_cache_layout": None, "prefix_match_unit": None, "gpu_memory_utilization": 0.92,
        "cache_dtype": "auto", "is_attention_free": False, "num_gpu_blocks_override": None,
        "sliding_window": None, "enable_prefix_caching": cap.enable_prefix_caching,
        "prefix_caching_hash_algo": "sha256", "prefix_cache_retention_interval": 0,
        "kv_cache_dtype_skip_layers": [], "mamba_page_size_padded": None, "skip_page_size_padded": None,
        "mamba_block_size": None, "mamba_cache_dtype": "auto", "mamba_ssm_cache_dtype": "auto",
        "mamba_cache_mode": "none", "enable_mamba_shared_prefix_checkpoint": False,
        "replayssm_buffer_len": 16, "use_replayssm": False, "use_kda_recoverssm": False,
        "num_gpu_blocks": cap.num_gpu_blocks * settings.data_parallel_size, "num_cpu_blocks": None,
        "effective_attention_block_size": cap.block_size,
        "kv_cache_size_tokens": int(concurrency * cap.max_model_len),
        "kv_cache_max_concurrency": concurrency, "hash_block_size": None,
        "cache_hit_alignment_tokens": None, "kv_sharing_fast_prefill": False, "swa_bounded_replay": True,
        "kv_cache_memory_bytes": None, "kv_offloading_size": None if offload is None else float(offload),
        "kv_offloading_backend": "native", "_block_size_resolved": True, names.ENGINE_LABEL: engine,
    }  # fmt: skip
    return {key: str(values[key]) for key in sorted(values)}


def buckets(max_model_len: int) -> dict[str, tuple[float, ...]]:
    """Bucket bounds by neutral histogram name, for an engine with this context length."""
    bounds = {**names.bucket_bounds(max_model_len), **_extra_bounds(max_model_len)}
    return {neutral: bounds[family] for family, neutral, _ in _ALL_HISTOGRAMS}


def _extra_bounds(max_model_len: int) -> dict[str, tuple[float, ...]]:
    """Bucket bounds of ``HISTOGRAMS``, for an engine with this context length."""
    tokens = names.token_buckets(max_model_len)
    return {
        names.REQUEST_PARAMS_N: names.REQUEST_PARAMS_N_BUCKETS,
        REQUEST_MAX_NUM_GENERATION_TOKENS: tokens,
        REQUEST_NUM_PREEMPTIONS: NUM_PREEMPTIONS_BUCKETS,
        REQUEST_PREFILL_KV_COMPUTED_TOKENS: tokens,
    }


def render_unread(w: Writer, lb: str, model: str, s: CoreStats) -> None:
    """The counters and gauges infctl reads none of, for one engine core (``lb``: its labels)."""
    tier = s.tier
    local, external = s.prompt_local_hits, s.prompt_external
    # fmt: off
    w.header("vllm:engine_sleep_state", "gauge",
             "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; "
             "weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.")
    for state, on in (("awake", 1), ("weights_offloaded", 0), ("discard_all", 0)):
        w.sample("vllm:engine_sleep_state", f'{lb},sleep_state="{state}"', on)
    w.counter(EXTERNAL_PREFIX_CACHE_QUERIES,
              "External prefix cache queries from KV connector cross-instance cache sharing, in terms of "
              "number of queried tokens.", lb, tier.query_tokens if tier else 0)
    w.counter(EXTERNAL_PREFIX_CACHE_HITS,
              "External prefix cache hits from KV connector cross-instance cache sharing, in terms of number "
              "of cached tokens.", lb, tier.hit_tokens if tier else 0)
    # A text-only engine: no multi-modal item is ever looked up.
    w.counter("vllm:mm_cache_queries_total",
              "Multi-modal cache queries, in terms of number of queried items.", lb, 0)
    w.counter("vllm:mm_cache_hits_total",
              "Multi-modal cache hits, in terms of number of cached items.", lb, 0)
    by_source = (("local_compute", s.prompt_tokens - local - external), ("local_cache_hit", local),
                 ("external_kv_transfer", external))
    w.counters("vllm:prompt_tokens_by_source_total", "Number of prompt tokens by source.",
               ((f'{lb},source="{k}"', n) for k, n in by_source))
    w.counter("vllm:prompt_tokens_cached_total", "Number of cached prompt tokens (local + external).",
              lb, local + external)
    # device: HBM's prefix-cache hits (vLLM adds prefix_cache_hits); host: the offload tier's (vLLM's CPU
    # tier reports CacheHitSource.HOST). The simulator has no disk tier and no P2P cache sharing.
    tiers = (("device", s.prefix_hits), ("host", tier.hit_tokens if tier else 0), ("p2p", 0), ("disk", 0),
             ("external_unspecified", 0))
    w.counters("vllm:prompt_tokens_cached_by_source_total",
               "Prefix-cache hit tokens by the cache tier that supplied them: device (local HBM), host "
               "(offloaded to DRAM), disk, p2p (transferred from another vLLM instance) or "
               "external_unspecified. Counted at admission; sums to vllm:prefix_cache_hits + "
               "vllm:external_prefix_cache_hits.",
               ((f'{lb},source="{k}"', n) for k, n in tiers))
    # The simulator has no admission queue limits (--max-num-queued-reqs/-tokens): nothing is rejected.
    rejections = label_pairs({names.MODEL_NAME_LABEL: model})
    w.counters("vllm:admission_rejections_total",
               "Number of admission attempts rejected by a queue limit, by reason.",
               ((f'{rejections},reason="{r}"', 0) for r in ("max_num_queued_reqs", "max_num_queued_tokens")))
    # fmt: on


def render(
    engine: EngineView,
    labels: str,
    cache_info: str,
    bucket_cache: dict[tuple[str, str, tuple[float, ...]], list[str]],
) -> str:
    """The ``/metrics`` body of one engine core (``labels``: its ``model_name`` and ``engine``;
    ``cache_info``: its ``cache_config_info`` labels; ``bucket_cache``: reused across scrapes)."""
    s = engine.stats()
    m = engine.metrics
    lb = labels
    w = Writer(bucket_cache)
    # fmt: off
    w.gauge(names.NUM_REQUESTS_RUNNING, "Number of requests in model execution batches.", lb, s.running)
    w.gauge(names.NUM_REQUESTS_WAITING, "Number of requests waiting to be processed.", lb, s.waiting)
    w.header(names.NUM_REQUESTS_WAITING_BY_REASON, "gauge", _WAITING_BY_REASON_HELP)
    w.sample(names.NUM_REQUESTS_WAITING_BY_REASON, f'{lb},reason="capacity"', s.waiting)
    w.sample(names.NUM_REQUESTS_WAITING_BY_REASON, f'{lb},reason="deferred"', 0)
    w.gauge(names.KV_CACHE_USAGE_PERC, "KV-cache usage. 1 means 100 percent usage.", lb, s.kv_usage)
    w.gauge(names.CACHE_CONFIG_INFO, "Information of the LLMEngine CacheConfig", cache_info, 1)
    w.counter(names.PREFIX_CACHE_QUERIES, "Prefix cache queries, in terms of number of queried tokens.",
              lb, s.prefix_queries)
    w.counter(names.PREFIX_CACHE_HITS, "Prefix cache hits, in terms of number of cached tokens.",
              lb, s.prefix_hits)
    w.counter(names.NUM_PREEMPTIONS, "Cumulative number of preemption from the engine.",
              lb, s.preemptions)
    w.counter(names.PROMPT_TOKENS, "Number of prefill tokens processed.", lb, s.prompt_tokens)
    w.counter(names.GENERATION_TOKENS, "Number of generation tokens processed.", lb, s.generation_tokens)
    w.counters(names.REQUEST_SUCCESS, "Count of successfully processed requests.",
               ((f'{lb},finished_reason="{r}"', m.finished.get(r, 0)) for r in _FINISH_REASONS))
    for family, key, help_ in _ALL_HISTOGRAMS:
        w.histogram(family, help_, lb, m.hist[key])
    render_unread(w, lb, engine.model, s)
    if s.tier is not None:
        _render_tier(w, lb, s.tier)
    if engine.settings.legacy_metrics:
        bs = max(1, s.block_size)
        w.gauge(names.GPU_CACHE_USAGE_PERC, "GPU KV-cache usage. 1 means 100 percent usage.",
                lb, s.kv_usage)
        w.counter(names.GPU_PREFIX_CACHE_QUERIES,
                  "GPU prefix cache queries, in terms of number of queried blocks.",
                  lb, s.prefix_queries // bs)
        w.counter(names.GPU_PREFIX_CACHE_HITS,
                  "GPU prefix cache hits, in terms of number of cached blocks.", lb, s.prefix_hits // bs)
        w.histogram(names.TIME_PER_OUTPUT_TOKEN, "Histogram of time per output token in seconds.",
                    lb, m.hist["itl"])
    # fmt: on
    return w.text()


def _render_tier(w: Writer, lb: str, t: TierStats) -> None:
    # fmt: off
    w.counter(KV_OFFLOAD_LOAD_BYTES, "Total bytes loaded from offload storage to GPU.", lb, t.load_bytes)
    w.counter(KV_OFFLOAD_LOAD_TIME, "Total load time from offload storage to GPU, in seconds.",
              lb, t.load_seconds)
    w.counter(KV_OFFLOAD_STORE_BYTES, "Total bytes stored from GPU to offload storage.", lb, t.store_bytes)
    w.counter(KV_OFFLOAD_STORE_TIME, "Total store time from GPU to offload storage, in seconds.",
              lb, t.store_seconds)
    load, store = f'{lb},transfer_type="CPU_to_GPU"', f'{lb},transfer_type="GPU_to_CPU"'
    w.counters(KV_OFFLOAD_TOTAL_BYTES, "Number of bytes offloaded by KV connector",
               ((load, t.load_bytes), (store, t.store_bytes)))
    w.counters(KV_OFFLOAD_TOTAL_TIME, "Total time measured by all KV offloading operations",
               ((load, t.load_seconds), (store, t.store_seconds)))
    w.gauge(KV_OFFLOAD_CPU_CACHE_USAGE, "CPU KV offload cache usage. 1 means 100 percent usage.",
            lb, t.used_blocks / t.capacity_blocks if t.capacity_blocks else 0.0)
    # fmt: on
