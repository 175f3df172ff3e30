"""The SGLang personality: metric families, flat error bodies, native endpoints, bootstrap-room PD.

PD follows SGLang's router protocol: the router adds ``bootstrap_host``, ``bootstrap_port`` and
``bootstrap_room`` to the body and sends it to a prefill and a decode server in parallel.

* ``--role prefill``: the request runs its prefill and answers with one token (max_tokens is ignored);
  its room is then marked complete in the process's :class:`BootstrapRegistry`.
* ``--role decode``: when ``bootstrap_port`` is the bootstrap port of a prefill instance in this process
  (``--bootstrap-port`` + index), the request waits for that room's prefill on that instance (a room whose
  prefill ran behind another port never arrives: the decode fails, as SGLang's would), then decodes with
  the prompt's KV transferred; otherwise (the prefill runs in another process) it decodes at once and the
  core charges the modelled transfer time.
* ``--role both``: bootstrap fields are ignored, as SGLang does without ``--disaggregation-mode``.
* ``--role prefill`` or ``decode`` without ``bootstrap_room``: refused as SGLang's scheduler refuses it
  (:data:`infctl.engines.sglang_pd.NO_BOOTSTRAP_ROOM`, status 400; a stream gets 200 and the error as an SSE
  event), whatever the prompt's length: a PD engine never serves a request alone.

Data parallel (one rank per personality): the scheduler gauges carry ``dp_rank``, the tokenizer's counters
and histograms do not (the DP engine adds them up over its ranks); a request is pinned as 0.5.15's OpenAI
routes pin it (:meth:`SglangPersonality.pinned_rank`): the ``X-Data-Parallel-Rank`` header, else the body's
``routed_dp_rank``, else its deprecated alias ``data_parallel_rank``.

Metric names and labels are the pinned image's (:data:`infctl.engines.sglang_launch.IMAGE`, 0.5.15,
``srt/observability/metrics_collector.py``, ``srt/managers/tokenizer_manager.py``): scheduler gauges labelled
``model_name``, ``engine_type`` (``unified``, ``prefill``, ``decode`` by ``--disaggregation-mode``),
``tp_rank``, ``pp_rank``, ``moe_ep_rank`` (and ``dp_rank``), the tokenizer's ``model_name`` and
``engine_type``; the PD queues are the prefill bootstrap and inflight queues and the decode prealloc and
transfer queues (0.5.4 named the bootstrap queue ``num_prefill_prealloc_queue_reqs``); preemptions are
SGLang's retractions (``num_retracted_requests_total``, a scheduler counter). A decode request
waiting for its prefill's KV is in the transfer queue, and ``/v1/loads`` counts it waiting, as 0.5.15's
``get_loads`` does.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from aiohttp import web

from infctl.engines import sglang as names
from infctl.engines import sglang_pd, versions
from infctl.engines.sglang_launch import IMAGE
from infctl.sim import prompt_tokens
from infctl.sim.personality.base import DPBalance, Personality
from infctl.sim.personality.engine_view import EngineView
from infctl.sim.personality.http_json import SimHTTPError, json_response, read_json_object
from infctl.sim.personality.pd import PDPlan
from infctl.telemetry.exposition import Writer, label_pairs

VERSION = versions.release(IMAGE)
"""What ``/get_server_info`` and ``/v1/loads`` report as ``version``: the release infctl pins
(``sglang_launch.IMAGE``, 0.5.15), whose metrics and protocol the personality imitates."""
ENGINE_TYPE_LABEL = "engine_type"

# Counters infctl.engines.sglang does not name (nothing outside the simulator reads them).
NUM_REQUESTS = "sglang:num_requests_total"
NUM_ABORTED_REQUESTS = "sglang:num_aborted_requests_total"


class SglangPersonality(Personality):
    name: ClassVar[str] = "sglang"
    owned_by: ClassVar[str] = "sglang"
    dp_balance: ClassVar[DPBalance] = "round_robin"
    dp_pd_roles: ClassVar[bool] = True

    def __init__(self, engine: EngineView, dp_rank: int | None = None) -> None:
        super().__init__(engine, dp_rank)
        engine_type = {"both": "unified"}.get(engine.role, engine.role)  # DisaggregationMode.to_engine_type
        tokenizer = {names.MODEL_NAME_LABEL: engine.model, ENGINE_TYPE_LABEL: engine_type}
        self._labels = label_pairs(tokenizer)
        """The tokenizer's labels (counters, histograms)."""
        # SGLang's scheduler labels, in its order; the simulated engine is one attention-TP rank 0 per
        # data-parallel rank (the scheduler that reports by default).
        ranks = (names.TP_RANK_LABEL, names.PP_RANK_LABEL, names.MOE_EP_RANK_LABEL)
        sched = {**tokenizer, **dict.fromkeys(ranks, "0")}
        if dp_rank is not None:
            sched[names.DP_RANK_LABEL] = str(dp_rank)
        self._sched_labels = label_pairs(sched)
        """A scheduler's labels (gauges): one scheduler per data-parallel rank."""

    def buckets(self) -> dict[str, tuple[float, ...]]:
        b = names.TIME_BUCKETS
        return {
            "ttft": b[names.TIME_TO_FIRST_TOKEN],
            "itl": b[names.INTER_TOKEN_LATENCY],
            "e2e": b[names.E2E_REQUEST_LATENCY],
        }

    @property
    def _capacity_tokens(self) -> int:
        cap = self.engine.capacity
        return int(cap.num_gpu_blocks * cap.block_size)

    def render_metrics(self) -> str:
        e = self.engine
        s = e.stats()
        lb, sl = self._labels, self._sched_labels
        w = Writer(self._bucket_cache)
        hit_rate = s.prefix_hits / s.prefix_queries if s.prefix_queries else 0.0
        finished = e.metrics.finished
        hist = e.metrics.hist
        # fmt: off
        w.gauge(names.NUM_RUNNING_REQS, "The number of running requests.", sl, s.running)
        w.gauge(names.NUM_QUEUE_REQS, "The number of requests in the waiting queue.", sl, s.waiting)
        w.gauge(names.NUM_USED_TOKENS, "The number of used tokens.", sl, s.used_blocks * s.block_size)
        w.gauge(names.MAX_TOTAL_NUM_TOKENS, "Maximum total number of tokens in the KV cache pool.",
                sl, self._capacity_tokens)
        w.gauge(names.TOKEN_USAGE, "The token usage.", sl, s.kv_usage)
        w.gauge(names.GEN_THROUGHPUT, "The generation throughput (token/s).", sl, e.gen_throughput())
        w.gauge(names.CACHE_HIT_RATE, "The prefix cache hit rate.", sl, hit_rate)
        w.gauge(names.NUM_PREFILL_BOOTSTRAP_QUEUE_REQS,
                "The number of requests in the prefill bootstrap queue.", sl, 0)
        w.gauge(names.NUM_PREFILL_INFLIGHT_QUEUE_REQS,
                "The number of requests in the prefill inflight queue.", sl, 0)
        w.gauge(names.NUM_DECODE_PREALLOC_QUEUE_REQS,
                "The number of requests in the decode prealloc queue.", sl, 0)
        w.gauge(names.NUM_DECODE_TRANSFER_QUEUE_REQS,
                "The number of requests in the decode transfer queue.", sl, e.pd_waiting)
        # The latest retraction's size until the next stats log: no log interval here, so always after it.
        w.gauge(names.NUM_RETRACTED_REQS, "The number of retracted requests.", sl, 0)
        w.counter(names.NUM_RETRACTED_REQUESTS, "Total number of retracted requests.", sl, s.preemptions)
        w.counter(names.PROMPT_TOKENS, "Number of prefill tokens processed.", lb, s.prompt_tokens)
        w.counter(names.GENERATION_TOKENS, "Number of generation tokens processed.", lb, s.generation_tokens)
        w.counter(names.CACHED_TOKENS, "Number of cached prompt tokens.", lb, s.prefix_hits)
        w.counter(NUM_REQUESTS, "Number of requests processed.", lb, sum(finished.values()))
        w.counter(NUM_ABORTED_REQUESTS, "Number of requests aborted.", lb, finished.get("abort", 0))
        w.histogram(names.TIME_TO_FIRST_TOKEN, "Histogram of time to first token in seconds.",
                    lb, hist["ttft"])
        w.histogram(names.INTER_TOKEN_LATENCY, "Histogram of inter-token latency in seconds.",
                    lb, hist["itl"])
        w.histogram(names.E2E_REQUEST_LATENCY, "Histogram of End-to-end request latency in seconds",
                    lb, hist["e2e"])
        # fmt: on
        return w.text()

    def error_body(self, err: SimHTTPError) -> dict[str, Any]:
        return {"object": "error", "message": err.message, "type": err.err_type, "param": err.param,
                "code": err.status}  # fmt: skip

    def stream_error_body(self, err: SimHTTPError) -> dict[str, Any]:
        # OpenAIServingBase.create_streaming_error_response: the flat error under "error".
        return {"error": self.error_body(err)}

    def accepts_model(self, name: object) -> bool:
        # SGLang serves whatever model name a request carries.
        return True

    def too_long(self, prompt_tokens: int, max_tokens: int | None) -> str:
        limit = self.engine.capacity.max_model_len
        if max_tokens is None:
            return (
                f"The input ({prompt_tokens} tokens) is longer than the model's context length "
                f"({limit} tokens)."
            )
        return (
            f"Requested token count exceeds the model's maximum context length of {limit} tokens. "
            f"You requested a total of {prompt_tokens + max_tokens} tokens: {prompt_tokens} tokens from "
            f"the input messages and {max_tokens} tokens for the completion. Please reduce the number of "
            "tokens in the input messages or the completion to fit within the limit."
        )

    def pd_plan(self, body: Mapping[str, Any], prompt_tokens: int, request_id: str) -> PDPlan:
        room = body.get("bootstrap_room")
        role = self.engine.role
        if role == "both":
            return PDPlan()
        if room is None:
            return PDPlan(refusal=SimHTTPError(400, f"{sglang_pd.NO_BOOTSTRAP_ROOM} req.rid={request_id!r}"))
        if not isinstance(room, int) or isinstance(room, bool):
            raise SimHTTPError(400, "bootstrap_room must be an integer", param="bootstrap_room")
        if role == "prefill":
            return PDPlan(max_tokens=1, prefill_leg=True, room=room, bootstrap_port=self.bootstrap_port)
        port = body.get("bootstrap_port") or sglang_pd.DEFAULT_BOOTSTRAP_PORT
        return PDPlan(
            remote_prefill=True, room=room, bootstrap_port=port,
            wait_local=port in self.engine.registry.local_ports,
        )  # fmt: skip

    def on_start(self) -> None:
        if self.engine.role == "prefill":
            self.engine.registry.local_ports.add(self.bootstrap_port)

    @property
    def bootstrap_port(self) -> int:
        """This instance's bootstrap port (``--bootstrap-port`` + index; reported, never bound)."""
        return self.engine.settings.bootstrap_port + self.engine.index

    def pinned_rank(self, headers: Mapping[str, str], body: Mapping[str, Any]) -> int | None:
        """As 0.5.15's chat and completion routes read it: the ``X-Data-Parallel-Rank`` header (``int()`` of
        its value, else a 400) wins over the body's ``routed_dp_rank``, which wins over its deprecated alias
        ``data_parallel_rank`` (``srt/entrypoints/openai/serving_base.py``
        ``extract_routed_dp_rank_from_header``, ``protocol.py`` ``_migrate_deprecated_dp_rank``)."""
        raw = headers.get(names.DP_RANK_HEADER)
        if raw is not None:
            try:
                return int(raw)
            except ValueError:
                message = f"Invalid X-Data-Parallel-Rank header: must be an integer, got '{raw}'"
                raise SimHTTPError(400, message, err_type="400") from None  # an HTTPException's shape
        for field in (names.ROUTED_DP_RANK_FIELD, names.DP_RANK_FIELD):
            rank = body.get(field)
            if rank is None:
                continue
            if not isinstance(rank, int) or isinstance(rank, bool):
                raise SimHTTPError(400, f"{field} must be an integer", param=field)
            return rank
        return None

    def room_rank(self, body: Mapping[str, Any], ranks: int) -> int | None:
        """A PD prefill serves a request on rank ``bootstrap_room % ranks``: 0.5.15 resolves
        ``--load-balance-method auto`` to ``follow_bootstrap_room`` for ``--disaggregation-mode prefill``
        (``ServerArgs._handle_load_balance_method``) and ``DataParallelController``'s
        ``follow_bootstrap_room_scheduler`` sends it there (a pinned request goes to its pin:
        :meth:`room_conflict`). A batch's list of rooms is not followed here."""
        room = body.get("bootstrap_room")
        if self.engine.role != "prefill" or not isinstance(room, int) or isinstance(room, bool):
            return None
        return room % ranks

    def room_conflict(self, body: Mapping[str, Any], rank: int, ranks: int) -> SimHTTPError:
        """A pinned rank other than the room's: the request goes there, its KV sender fails the bootstrap
        (0.5.15 ``srt/disaggregation/common/conn.py`` ``CommonKVSender``, "follow_bootstrap_room conflict")
        and the prefill aborts it before prefilling, with 500 ("Prefill bootstrap failed ... with exception
        ...", ``disaggregation/prefill.py`` ``handle_bootstrap_failure``); the decode waiting on the room
        fails too."""
        room = int(body["bootstrap_room"])
        self.engine.registry.complete(self.bootstrap_port, room, False)
        return SimHTTPError(
            500,
            f"Prefill bootstrap failed for request rank=0 req.bootstrap_room={room} with exception "
            f"follow_bootstrap_room conflict: dispatched to dp_rank {rank} but bootstrap_room {room} implies "
            f"dp_rank {room % ranks}. Set SGLANG_DISAGGREGATION_FORCE_QUERY_PREFILL_DP_RANK=1 to allow mixed "
            "routing.",
        )

    def dp_routes(self, ranks: Sequence[Personality]) -> list[web.RouteDef]:
        def loads() -> list[dict[str, Any]]:
            return [r.load() for r in ranks if isinstance(r, SglangPersonality)]

        async def v1_loads(request: web.Request) -> web.Response:
            return json_response(_loads_body(loads()))

        async def get_load(request: web.Request) -> web.Response:
            return json_response(_legacy_loads(loads()))

        async def flush_cache(request: web.Request) -> web.Response:
            # Every rank's scheduler gets the flush and flushes if idle; the answer is the first rank's
            # (TokenizerManager.flush_cache takes result [0]).
            flushed = [r.engine.reset_cache() for r in ranks]
            return _flush_answer(flushed[0])

        return [
            web.get("/v1/loads", v1_loads),
            web.get("/get_load", get_load),
            web.get("/flush_cache", flush_cache),
            web.post("/flush_cache", flush_cache),
        ]

    def pd_finished(self, plan: PDPlan, ok: bool) -> None:
        if plan.prefill_leg and plan.room is not None and plan.bootstrap_port is not None:
            self.engine.registry.complete(plan.bootstrap_port, plan.room, ok)

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/get_server_info", self._server_info),
            web.get("/server_info", self._server_info),
            web.get("/get_model_info", self._model_info),
            web.get("/model_info", self._model_info),
            web.get("/v1/loads", self._loads),
            web.get("/get_load", self._get_load),
            web.get("/health_generate", self._health_generate),
            web.get("/flush_cache", self._flush_cache),
            web.post("/flush_cache", self._flush_cache),
            web.post("/v1/tokenize", self._tokenize),
            web.post("/tokenize", self._tokenize),
        ]

    def load(self) -> dict[str, Any]:
        """This rank's entry of ``/v1/loads``."""
        e = self.engine
        s = e.stats()
        cap = e.capacity
        waiting = s.waiting + e.pd_waiting  # the decode transfer queue is waiting too
        return {
            "dp_rank": self.dp_rank or 0, "num_running_reqs": s.running, "num_waiting_reqs": waiting,
            "num_total_reqs": s.running + waiting, "num_used_tokens": s.used_blocks * s.block_size,
            "max_total_num_tokens": self._capacity_tokens, "token_usage": s.kv_usage,
            "gen_throughput": e.gen_throughput(),
            "cache_hit_rate": s.prefix_hits / s.prefix_queries if s.prefix_queries else 0.0,
            "utilization": s.running / cap.max_num_seqs if cap.max_num_seqs else 0.0,
            "max_running_requests": cap.max_num_seqs,
        }  # fmt: skip

    async def _loads(self, request: web.Request) -> web.Response:
        return json_response(_loads_body([self.load()]))

    async def _get_load(self, request: web.Request) -> web.Response:
        return json_response(_legacy_loads([self.load()]))

    async def _server_info(self, request: web.Request) -> web.Response:
        e = self.engine
        cap = e.capacity
        mode = {"both": "null"}.get(e.role, e.role)
        return json_response({
            "model_path": e.model, "served_model_name": e.model, "tokenizer_path": e.model,
            "host": e.host, "port": e.port, "context_length": cap.max_model_len, "page_size": cap.block_size,
            "max_running_requests": cap.max_num_seqs, "chunked_prefill_size": cap.max_num_batched_tokens,
            "max_prefill_tokens": cap.max_num_batched_tokens,
            "disable_radix_cache": not cap.enable_prefix_caching,
            "disaggregation_mode": mode, "disaggregation_bootstrap_port": self.bootstrap_port,
            "enable_metrics": True, "enable_cache_report": True, "tp_size": 1,
            # 0.5.15 answers ServerArgs as resolved at start (dataclasses.asdict): dp_size is the rank count,
            # DP attention or not; it has no attn_dp_size (0.5.22 added it: engines.sglang_pd).
            "dp_size": e.settings.data_parallel_size, "enable_dp_attention": False,
            "load_balance_method": "follow_bootstrap_room" if e.role == "prefill" else "round_robin",
            "max_total_num_tokens": self._capacity_tokens,
            "internal_states": [{"last_gen_throughput": e.gen_throughput(), "avg_spec_accept_length": None}],
            "version": VERSION,
        })  # fmt: skip

    async def _model_info(self, request: web.Request) -> web.Response:
        m = self.engine.model
        return json_response({
            "model_path": m, "tokenizer_path": m, "is_generation": True, "preferred_sampling_params": None,
            "weight_version": "default", "has_image_understanding": False, "has_audio_understanding": False,
            "model_type": "llama", "architectures": ["LlamaForCausalLM"],
        })  # fmt: skip

    async def _health_generate(self, request: web.Request) -> web.Response:
        if self.engine.faults.plan.health_fail or not await self.engine.probe():
            return web.Response(status=503)
        return web.Response(status=200)

    async def _tokenize(self, request: web.Request) -> web.Response:
        """SGLang's ``/v1/tokenize``: a ``prompt`` string (or a list of them, answered per string), special
        tokens added unless ``add_special_tokens`` is false; no chat messages."""
        body = await read_json_object(request)
        tok, prompt = self.engine.tokenizer, body.get("prompt")
        cap = self.engine.capacity.max_model_len
        if isinstance(prompt, str):
            ids = await prompt_tokens.tokenized(tok, len(prompt), prompt_tokens.text_ids, prompt, body)
            return json_response({"tokens": ids, "count": len(ids), "max_model_len": cap})
        if isinstance(prompt, list) and all(isinstance(p, str) for p in prompt):
            lists = [
                await prompt_tokens.tokenized(tok, len(p), prompt_tokens.text_ids, p, body) for p in prompt
            ]
            return json_response({"tokens": lists, "count": [len(x) for x in lists], "max_model_len": cap})
        raise SimHTTPError(
            400, "Field required: prompt must be a string or a list of strings", param="prompt"
        )

    async def _flush_cache(self, request: web.Request) -> web.Response:
        return _flush_answer(self.engine.reset_cache())


def _flush_answer(flushed: bool) -> web.Response:
    """SGLang's ``/flush_cache`` answer: one text, 200 when flushed, 400 when requests ran or waited."""
    return web.Response(status=200 if flushed else 400, text=names.FLUSH_CACHE_ANSWER)


_SUMMED = ("num_running_reqs", "num_waiting_reqs", "num_total_reqs", "num_used_tokens",
           "max_total_num_tokens", "gen_throughput", "max_running_requests")  # fmt: skip


def _loads_body(loads: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``/v1/loads``: one entry per rank and their aggregate (counts added up, ratios averaged)."""
    aggregate: dict[str, Any] = {}
    for key in loads[0]:
        if key == "dp_rank":
            continue
        values = [load[key] for load in loads]
        aggregate[key] = sum(values) if key in _SUMMED else sum(values) / len(values)
    return {
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "version": VERSION,
        "dp_rank_count": len(loads), "loads": list(loads), "aggregate": aggregate,
    }  # fmt: skip


def _legacy_loads(loads: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``/get_load``: per rank, ``num_reqs`` counting running and waiting."""
    return [
        {"dp_rank": load["dp_rank"], "num_reqs": load["num_total_reqs"],
         "num_waiting_reqs": load["num_waiting_reqs"], "num_tokens": load["num_used_tokens"]}
        for load in loads
    ]  # fmt: skip
