"""SGLang: metric names, signals, health and load endpoints; the command line and environment (and the
release that accepts each of its flags) is :mod:`infctl.engines.sglang_launch`, the PD protocol
:mod:`infctl.engines.sglang_pd`, the load endpoints' bodies :mod:`infctl.engines.sglang_load`.

SGLang serves /metrics only with ``--enable-metrics``. Scheduler gauges carry ``model_name``,
``engine_type`` (``unified``, ``prefill``, ``decode``) and the scheduler's rank labels (``tp_rank``,
``pp_rank``, ``moe_ep_rank``; see :data:`SCHEDULER_COPY_LABELS` for why a TP>1 engine may show several
copies of each); tokenizer counters and histograms carry ``model_name`` and ``engine_type``, and
``sglang:cached_tokens_total`` also ``cache_source`` (device, host, storage). With
``--enable-priority-scheduling`` every series also carries ``priority`` (:data:`PRIORITY_LABEL`). Older
releases labelled the model ``name``. (Read in 0.5.15 and 0.5.23, ``srt/observability/metrics_collector.py``.)

Data parallel (``--dp-size N``, or DP attention: ``--dp-size N --enable-dp-attention``, ``--attn-dp-size N``
from 0.5.22, see :data:`~infctl.engines.sglang_launch.RENAMED_FLAGS`): each rank's scheduler adds
``dp_rank`` to its labels, so the scheduler gauges (queue, running, token usage, capacity) come one series
per rank, while the tokenizer's counters (prompt, cached, generated tokens) stay engine-wide.
``/v1/loads`` lists one entry per ``dp_rank``. A request is pinned to a rank by the body field
``data_parallel_rank`` (0.5.x; ``DataParallelController`` sends it straight to that rank's scheduler), renamed
``routed_dp_rank`` in early 2026 with ``data_parallel_rank`` kept as a deprecated alias (sglang#19268);
the OpenAI routes of releases after sglang#19832 (March 2026) also read the ``X-Data-Parallel-Rank``
header, which wins over the body. A PD prefill engine's rank is the room's, though
(:mod:`infctl.engines.sglang_pd`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from infctl.engines import sglang_launch, sglang_load, sglang_pd
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
from infctl.telemetry.prometheus import MetricFamilies, label_values, value
from infctl.telemetry.signals import EngineSignals, LoadReport

if TYPE_CHECKING:
    from infctl.config.model import ModelProfile

NAME: Final = "sglang"
MODEL_NAME_LABEL = "model_name"
LEGACY_MODEL_NAME_LABEL = "name"
DP_RANK_LABEL = "dp_rank"
"""On the scheduler gauges of a data-parallel engine: the rank's index."""

TP_RANK_LABEL = "tp_rank"
PP_RANK_LABEL = "pp_rank"
MOE_EP_RANK_LABEL = "moe_ep_rank"
SCHEDULER_COPY_LABELS = frozenset({TP_RANK_LABEL, PP_RANK_LABEL, MOE_EP_RANK_LABEL})
"""Labels that tell apart the schedulers of one data-parallel rank. Every scheduler labels its gauges
``tp_rank``, ``pp_rank`` and ``moe_ep_rank`` (plus ``dp_rank`` with DP; 0.5.15 and 0.5.23,
``SchedulerMetricsCollector``); by default only attention-TP rank 0 of each DP rank records them, but with
``--enable-metrics-for-all-schedulers`` every TP rank does, each a copy of the same state (the TP group runs
one batch in lockstep), and with expert parallelism each copy has its own ``moe_ep_rank`` too. Added up, a
TP=8 engine would read eight times its queue."""
PRIORITY_LABEL = "priority"
"""With ``--enable-priority-scheduling`` the queue and running gauges (``_log_gauge_queue_count``, 0.5.15
and 0.5.23) hold the total under ``priority=""`` and each priority's share under ``priority="<n>"``: a
series with a non-empty value is part of the total beside it, never a rank of its own."""

DP_RANK_FIELD = "data_parallel_rank"
"""Request body field that pins a request to one DP rank (0.5.x; a deprecated alias of ``routed_dp_rank``
in later releases)."""
ROUTED_DP_RANK_FIELD = "routed_dp_rank"
"""The field's name since sglang#19268 (2026)."""
DP_RANK_HEADER = "x-data-parallel-rank"
"""Pins a request to one DP rank in releases after sglang#19832 (2026); wins over the body fields."""

# Scheduler gauges.
NUM_RUNNING_REQS = "sglang:num_running_reqs"
NUM_QUEUE_REQS = "sglang:num_queue_reqs"
TOKEN_USAGE = "sglang:token_usage"
"""KV-cache usage, 0..1."""
CACHE_HIT_RATE = "sglang:cache_hit_rate"
GEN_THROUGHPUT = "sglang:gen_throughput"
"""Generated tokens per second."""
MAX_TOTAL_NUM_TOKENS = "sglang:max_total_num_tokens"
"""KV-cache capacity in tokens."""
NUM_USED_TOKENS = "sglang:num_used_tokens"
NUM_PREFILL_BOOTSTRAP_QUEUE_REQS = "sglang:num_prefill_bootstrap_queue_reqs"
"""A prefill engine's requests waiting for their decode engine to bootstrap (0.5.15, 0.5.23)."""
NUM_PREFILL_INFLIGHT_QUEUE_REQS = "sglang:num_prefill_inflight_queue_reqs"
"""A prefill engine's prefilled requests whose KV is being sent."""
NUM_PREFILL_PREALLOC_QUEUE_REQS = "sglang:num_prefill_prealloc_queue_reqs"
"""The bootstrap queue's name in older releases (``srt/metrics/collector.py``); 0.5.15 and later expose
:data:`NUM_PREFILL_BOOTSTRAP_QUEUE_REQS` instead."""
NUM_DECODE_PREALLOC_QUEUE_REQS = "sglang:num_decode_prealloc_queue_reqs"
NUM_DECODE_TRANSFER_QUEUE_REQS = "sglang:num_decode_transfer_queue_reqs"
NUM_RETRACTED_REQS = "sglang:num_retracted_reqs"
"""Not a queue: how many requests the scheduler's latest retraction (KV cache full) took back, set when it
retracts and reset to 0 at each stats log, in every mode (0.5.15, 0.5.23 ``scheduler.py``
``update_running_batch``, ``scheduler_components/metrics_reporter.py``). A PD decode keeps the requests it
retracts in its retracted queue (``DecodePreallocQueue.retracted_queue``), which no gauge reports: see
:data:`WAITING_PD_QUEUES`."""

# Counters (sample names).
PROMPT_TOKENS = "sglang:prompt_tokens_total"
GENERATION_TOKENS = "sglang:generation_tokens_total"
CACHED_TOKENS = "sglang:cached_tokens_total"
"""Prompt tokens served from the cache, labelled ``cache_source``: the radix cache (device) or, with HiCache,
host memory or storage."""
NUM_REQUESTS = "sglang:num_requests_total"
NUM_ABORTED_REQUESTS = "sglang:num_aborted_requests_total"
NUM_RETRACTED_REQUESTS = "sglang:num_retracted_requests_total"
"""Requests retracted to free KV cache (a scheduler counter, one series per rank), SGLang's preemptions
(0.5.15, 0.5.23 ``increment_retracted_reqs``)."""

# Histograms (family names).
TIME_TO_FIRST_TOKEN = "sglang:time_to_first_token_seconds"
INTER_TOKEN_LATENCY = "sglang:inter_token_latency_seconds"
E2E_REQUEST_LATENCY = "sglang:e2e_request_latency_seconds"

GAUGES = (
    NUM_RUNNING_REQS,
    NUM_QUEUE_REQS,
    TOKEN_USAGE,
    CACHE_HIT_RATE,
    GEN_THROUGHPUT,
    MAX_TOTAL_NUM_TOKENS,
    NUM_USED_TOKENS,
    NUM_PREFILL_BOOTSTRAP_QUEUE_REQS,
    NUM_PREFILL_INFLIGHT_QUEUE_REQS,
    NUM_DECODE_PREALLOC_QUEUE_REQS,
    NUM_DECODE_TRANSFER_QUEUE_REQS,
    NUM_RETRACTED_REQS,
)
COUNTERS = (
    PROMPT_TOKENS,
    GENERATION_TOKENS,
    CACHED_TOKENS,
    NUM_REQUESTS,
    NUM_ABORTED_REQUESTS,
    NUM_RETRACTED_REQUESTS,
)
HISTOGRAMS = (TIME_TO_FIRST_TOKEN, INTER_TOKEN_LATENCY, E2E_REQUEST_LATENCY)
PD_QUEUE_GAUGES = (
    NUM_PREFILL_BOOTSTRAP_QUEUE_REQS,
    NUM_PREFILL_INFLIGHT_QUEUE_REQS,
    NUM_DECODE_PREALLOC_QUEUE_REQS,
    NUM_DECODE_TRANSFER_QUEUE_REQS,
)
"""The PD queues outside ``sglang:num_queue_reqs``, 0.5.15 and 0.5.23 (older releases: the bootstrap queue
as :data:`NUM_PREFILL_PREALLOC_QUEUE_REQS`)."""
WAITING_PD_QUEUES = (
    NUM_PREFILL_BOOTSTRAP_QUEUE_REQS,
    NUM_PREFILL_PREALLOC_QUEUE_REQS,
    NUM_DECODE_PREALLOC_QUEUE_REQS,
    NUM_DECODE_TRANSFER_QUEUE_REQS,
)
"""Requests a PD engine holds but does not compute yet, waiting beside ``sglang:num_queue_reqs`` (which holds
none of them): a prefill's bootstrap queue (until its decode has met it and has KV room; the inflight queue,
whose KV is being sent, is computed already), a decode's prealloc queue (until it has KV room) and transfer
queue (until the prefill's KV has arrived). SGLang's ``/v1/loads`` counts ``num_waiting_reqs`` so (0.5.15,
0.5.23 ``srt/managers/scheduler_components/load_inquirer.py``). Each gauge is set only in its own
disaggregation mode, so the sum fits every role; the older bootstrap name is read too (0.5.4
``srt/managers/scheduler_metrics_mixin.py``).

``/v1/loads`` also counts a decode's retracted queue (requests it took back when its KV cache filled, to
resume when there is room again; ``include=disagg`` reports it alone as ``decode_retracted_queue_reqs``), but
no gauge reports that queue in 0.5.15 or 0.5.23, so the queue read from /metrics leaves it out, and the one
read from ``/v1/loads`` (:func:`~infctl.engines.sglang_load.parse_load`) has it. :data:`NUM_RETRACTED_REQS`
is no stand-in: it counts the latest retraction, not the requests still waiting (it drops to 0 at the next
stats log while they wait), and outside PD the retracted requests are back in ``num_queue_reqs`` already.
Retractions are read as :attr:`EngineSignals.preemptions` (:data:`NUM_RETRACTED_REQUESTS`)."""
METRIC_NAMES = GAUGES + COUNTERS + HISTOGRAMS

TTFT_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0,
                200.0, 400.0)  # fmt: skip
ITL_BUCKETS = (0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.06, 0.08, 0.1,
               0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0)  # fmt: skip
E2E_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0,
               200.0, 400.0, 600.0, 1200.0, 1800.0, 2400.0)  # fmt: skip
TIME_BUCKETS = {
    TIME_TO_FIRST_TOKEN: TTFT_BUCKETS,
    INTER_TOKEN_LATENCY: ITL_BUCKETS,
    E2E_REQUEST_LATENCY: E2E_BUCKETS,
}

_SIGNALS = (
    NUM_QUEUE_REQS,
    *WAITING_PD_QUEUES,
    NUM_RUNNING_REQS,
    TOKEN_USAGE,
    MAX_TOTAL_NUM_TOKENS,
    PROMPT_TOKENS,
    GENERATION_TOKENS,
    CACHED_TOKENS,
    NUM_RETRACTED_REQUESTS,
)

DIAGNOSTICS = Diagnostics(
    signals=(
        SignalCheck("queue", (NUM_QUEUE_REQS,), "router, autoscaler"),
        SignalCheck("running", (NUM_RUNNING_REQS,), "router, autoscaler"),
        SignalCheck("KV usage", (TOKEN_USAGE,), "router, autoscaler"),
        SignalCheck("cache size", (MAX_TOTAL_NUM_TOKENS,), "router (prefix index size)", False),
        SignalCheck("prefix hits", (CACHED_TOKENS,), "router, bench", False),
        SignalCheck("prompt tokens", (PROMPT_TOKENS,), "router, bench", False),
    ),
    prefix_caching_fix="drop --disable-radix-cache from the SGLang command line",
    metrics_flag_fix="start SGLang with --enable-metrics",
    # /server_info first: every release since 0.5.15 serves it and logs /get_server_info as deprecated on
    # each call; older ones (0.5.4) serve only /get_server_info.
    server_info_paths=("/server_info", "/get_server_info"),
    prefix_off_key="disable_radix_cache",
    metrics_on_key="enable_metrics",
)

SIGNAL_METRICS = SignalMetrics(
    queue=NUM_QUEUE_REQS,
    running=NUM_RUNNING_REQS,
    kv_usage=TOKEN_USAGE,
    ttft=TIME_TO_FIRST_TOKEN,
    ttft_buckets=TTFT_BUCKETS,
    itl=INTER_TOKEN_LATENCY,
    e2e=E2E_REQUEST_LATENCY,
    prompt_tokens=PROMPT_TOKENS,
    generation_tokens=GENERATION_TOKENS,
    model_label=MODEL_NAME_LABEL,
    more_queues=WAITING_PD_QUEUES,
    # Prefilled requests whose KV is still being sent: a prefill stopped now fails its decode's transfer.
    busy=(NUM_PREFILL_INFLIGHT_QUEUE_REQS,),
    copy_labels=(TP_RANK_LABEL, PP_RANK_LABEL, MOE_EP_RANK_LABEL),
    share_label=PRIORITY_LABEL,
)
"""Queries count the queue as :meth:`SGLangAdapter.signals` does: the waiting queue and the PD queues, each
rank's copies once, no per-priority share (:mod:`infctl.engines.promql`)."""
FLUSH_CACHE_ANSWER = (
    "Cache flushed.\nPlease check backend logs for more details. "
    "(When there are running or waiting requests, the operation will not be performed.)\n"
)
"""``/flush_cache``'s plain-text answer, flushed (200) or not (400) alike."""
CACHE_RESET = CacheReset(
    path="/flush_cache",
    absent_fix="SGLang serves /flush_cache whatever its flags: check that this URL is an SGLang server",
    # GET or POST, no flag needed; 200 once the radix cache is flushed, 400 (the same text) while requests
    # run or wait: each scheduler flushes only when idle, and the answer is the first data-parallel rank's
    # (srt/entrypoints/http_server.py ``flush_cache``, managers/tokenizer_manager.py, managers/scheduler.py).
    busy_statuses=(400,),
)
"""SGLang's prefix-cache (radix cache) flush: ``POST /flush_cache``."""
PROFILE_RULES = ProfileRules(
    pd_fields=frozenset({"transfer_backend", "bootstrap_port", "ib_device"}),
    pd_hint="SGLang picks its transfer through pd.transfer_backend (mooncake or nixl)",
    offload_backends=("hicache",),
    dp_attention=True,
)


class SGLangAdapter:
    """The SGLang adapter (stateless; use the module's ``ADAPTER``)."""

    name = NAME
    metrics_path = "/metrics"
    metrics_hint = "SGLang serves /metrics only when started with --enable-metrics"
    wanted_metrics = frozenset(_SIGNALS)
    health = HealthSpec(path="/health", deep_path="/health_generate", starting_statuses=(503,))
    """SGLang answers 503 until its warm-up request has run (and again when unhealthy); ``/health`` is cheap
    only with :data:`~infctl.engines.sglang_launch.HEALTH_GENERATION_ENV` false, which :meth:`launch_env`
    sets."""
    load_paths = ("/v1/loads", "/get_load")
    """``/v1/loads`` in current releases; ``/get_load`` in older ones (a deprecated shim in newer)."""
    cache_reset = CACHE_RESET
    pd_style: PDStyle = "parallel"
    decode_serves_alone = False
    """A ``--disaggregation-mode decode`` server never prefills on its own: its scheduler aborts a request
    without ``bootstrap_room`` (:data:`~infctl.engines.sglang_pd.NO_BOOTSTRAP_ROOM`, HTTP 400), whatever
    the prompt's length."""
    dp_rank_header: str | None = DP_RANK_HEADER
    dp_rank_label = DP_RANK_LABEL
    rank_capacity_is_engine_total = False
    """A rank's ``max_total_num_tokens`` is its own pool (:meth:`signals` adds the ranks' up)."""
    default_image = sglang_launch.IMAGE
    flag_versions = sglang_launch.FLAG_VERSIONS
    oldest_checked = sglang_launch.OLDEST_CHECKED
    diagnostics = DIAGNOSTICS
    signal_metrics = SIGNAL_METRICS
    profile_rules = PROFILE_RULES

    def signals(self, families: MetricFamilies) -> EngineSignals:
        """Scheduler series are read once per DP rank (:func:`per_rank`), then added up (queue, running,
        capacity, retractions) or averaged (usage) over the ranks; tokenizer counters are engine-wide. The
        queue is every request the engine holds and does not compute yet that a gauge reports: the waiting
        queue and, on a PD engine, its :data:`WAITING_PD_QUEUES`."""
        capacity = per_rank(families, MAX_TOTAL_NUM_TOKENS)
        usage = per_rank(families, TOKEN_USAGE)
        names = label_values(families, _SIGNALS, MODEL_NAME_LABEL) or label_values(
            families, _SIGNALS, LEGACY_MODEL_NAME_LABEL
        )
        return EngineSignals(
            queue=sum(sum(per_rank(families, name)) for name in SIGNAL_METRICS.queues),
            running=sum(per_rank(families, NUM_RUNNING_REQS)),
            kv_usage=sum(usage) / len(usage) if usage else 0.0,
            prefix_queries=value(families, PROMPT_TOKENS),
            prefix_hits=value(families, CACHED_TOKENS),
            prompt_tokens=value(families, PROMPT_TOKENS),
            generation_tokens=value(families, GENERATION_TOKENS),
            preemptions=sum(per_rank(families, NUM_RETRACTED_REQUESTS)),
            cache_capacity_tokens=int(sum(capacity)) if capacity else None,
            model_names=names,
        )

    def pin_rank(self, rank: int) -> RankPin:
        """Both the header (newer releases) and the ``data_parallel_rank`` body field (0.5.x, still read by
        newer ones as an alias): every release serves the request on ``rank``."""
        return RankPin(headers={DP_RANK_HEADER: str(rank)}, body={DP_RANK_FIELD: rank})

    def dp_ranks(self, model: ModelProfile, role: Role) -> int:
        """As SGLang resolves the command line (:func:`~infctl.engines.sglang_launch.dp_ranks`)."""
        return sglang_launch.dp_ranks(sglang_launch.launch_command(model, role=role, port=0))

    def reported_dp_ranks(self, info: object) -> int | None:
        return sglang_pd.reported_dp_ranks(info)

    def parse_load(self, body: object) -> LoadReport:
        return sglang_load.parse_load(body)

    def prefill_body(
        self, body: Mapping[str, Any], prefill: PDEndpoint, room: int | Sequence[int] | None = None
    ) -> Body:
        return sglang_pd.prefill_body(body, prefill, room)

    def decode_body(
        self,
        body: Mapping[str, Any],
        prefill_response: Mapping[str, Any] | None,
        prefill: PDEndpoint,
        room: int | Sequence[int] | None = None,
    ) -> Body:
        return sglang_pd.decode_body(body, prefill, room)

    def launch_command(
        self, model: ModelProfile, *, role: Role, port: int, host: str = "0.0.0.0"
    ) -> list[str]:
        return sglang_launch.launch_command(model, role=role, port=port, host=host)

    def launch_env(self, model: ModelProfile, role: Role) -> dict[str, str]:
        return sglang_launch.launch_env(model, role)

    def pod_ip_env(self, model: ModelProfile, role: Role) -> tuple[str, ...]:
        return sglang_launch.pod_ip_env(model, role)

    def multinode_args(
        self, model: ModelProfile, *, nodes: int, gpus_per_node: int, leader: bool
    ) -> MultiNodeArgs:
        return sglang_launch.multinode_args(model, nodes=nodes, gpus_per_node=gpus_per_node, leader=leader)

    def host_port_runs(self, model: ModelProfile, role: Role) -> dict[str, int]:
        return sglang_launch.host_port_runs(model, role)

    def host_port_args(self, ports: Mapping[str, int], host: str) -> list[str]:
        return sglang_launch.host_port_args(ports, host)

    def host_port_env(self, ports: Mapping[str, int], host: str) -> dict[str, str]:
        return sglang_launch.host_port_env(ports, host)


def per_rank(families: MetricFamilies, name: str) -> list[float]:
    """One value of scheduler gauge ``name`` per data-parallel rank (NaN samples ignored).

    Series that differ only in :data:`SCHEDULER_COPY_LABELS` are copies of one rank's scheduler state, and the
    largest of them stands for the rank (copies may lag each other by a step; the larger queue or usage is
    the safer one to route on). A per-priority share (:data:`PRIORITY_LABEL` not empty) is already in its
    total. Every other label set (``dp_rank``, the model) is a rank of its own."""
    by_rank: dict[tuple[tuple[str, str], ...], float] = {}
    for s in families.get(name, ()):
        if s.value != s.value or s.labels.get(PRIORITY_LABEL):  # NaN, or a share of the total
            continue
        key = tuple(sorted((k, v) for k, v in s.labels.items() if k not in SCHEDULER_COPY_LABELS))
        seen = by_rank.get(key)
        by_rank[key] = s.value if seen is None else max(seen, s.value)
    return list(by_rank.values())


ADAPTER = SGLangAdapter()
