"""The engine-neutral records engine adapters (:class:`~infctl.engines.adapter.EngineAdapter`) exchange with
the rest of infctl: PD endpoints and styles, health, cache resets, rank pins, what doctor checks, which
metric carries which signal, what a profile may ask, multi-node arguments; and SGLang-style PD bootstrap
rooms (:func:`new_bootstrap_room`). Pure data and functions, no I/O.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

PDStyle = Literal["sequential", "parallel"]
"""How a disaggregated request reaches the two engines.

sequential (vLLM): the prefill leg runs to completion first; its response carries the KV handle
(``kv_transfer_params``) that the decode leg must be sent with.
parallel (SGLang): both legs carry the same bootstrap rendezvous (host, port, room) and are sent at
once; the engines meet over the bootstrap server and the client's stream comes from decode.
"""

Role = Literal["prefill", "decode", "both"]
"""An engine's part in PD serving; ``both`` is an aggregated (non-disaggregated) engine."""

Body = dict[str, Any]
"""An OpenAI request or response body, as parsed JSON."""

COMPLETIONS_DEFAULT_MAX_TOKENS = 16
"""Tokens a ``/v1/completions`` request without ``max_tokens`` (or with ``null``) generates, in vLLM and
SGLang alike (OpenAI's default): vLLM 0.32 ``CompletionRequest.max_tokens: int | None = 16``
(vllm/entrypoints/openai/completion/protocol.py, a null normalized to it), SGLang
``CompletionRequest.max_tokens: int = 16`` (python/sglang/srt/entrypoints/openai/protocol.py). A chat has
no such default: the rest of the context."""


@dataclass(frozen=True, slots=True)
class PDEndpoint:
    """Where the prefill leg of one request goes, as the decode leg needs to know it."""

    host: str
    """Prefill engine's host or IP, as reachable from the decode engine."""
    port: int
    """Prefill engine's HTTP port."""
    bootstrap_port: int | None = None
    """SGLang: the prefill engine's ``--disaggregation-bootstrap-port``; None means the engine default."""


@dataclass(frozen=True, slots=True)
class HealthSpec:
    """How to tell whether an engine can take traffic."""

    path: str = "/health"
    """Cheap liveness/readiness probe: HTTP 200 means ready."""
    deep_path: str | None = None
    """Probe that runs a real one-token generation (slower; for doctor, not for every tick)."""
    fatal_statuses: tuple[int, ...] = ()
    """Statuses of ``path`` that mean the engine is dead and will not recover without a restart."""
    starting_statuses: tuple[int, ...] = ()
    """Statuses of ``path`` that mean the engine is still loading (wait, do not restart)."""

    def state(self, status: int | None) -> Literal["ready", "starting", "dead", "unhealthy"]:
        """Classify one probe: ``status`` None means the connection failed (not listening yet, or gone)."""
        if status == 200:
            return "ready"
        if status is None or status in self.starting_statuses:
            return "starting"
        if status in self.fatal_statuses:
            return "dead"
        return "unhealthy"


CacheResetOutcome = Literal["reset", "busy", "absent", "refused"]
"""How an engine answered :attr:`CacheReset.path`: emptied its prefix cache; did not, because requests hold
blocks (retry once they finish); does not serve the path (404: see :attr:`CacheReset.absent_fix`); other."""


@dataclass(frozen=True, slots=True)
class CacheReset:
    """How to empty an engine's prefix cache, as benchmarks do before each arm so that none starts warm."""

    path: str
    method: str = "POST"
    env: Mapping[str, str] = field(default_factory=dict)
    """Environment the engine must be started with to serve :attr:`path` (it answers 404 without)."""
    absent_fix: str = ""
    """What to do when the engine answers 404."""
    busy_statuses: tuple[int, ...] = ()
    """Statuses that mean the engine holds requests and did not reset (the call may be repeated)."""
    success_key: str | None = None
    """Key of a 200 JSON answer that is false when the engine did not reset for the same reason."""

    def outcome(self, status: int, body: bytes) -> CacheResetOutcome:
        """Classify one answer to :attr:`path`."""
        if status == 404:
            return "absent"
        if status in self.busy_statuses:
            return "busy"
        if status != 200:
            return "refused"
        if self.success_key is None:
            return "reset"
        try:
            answer = json.loads(body)
        except ValueError:
            return "refused"
        if not isinstance(answer, dict) or not isinstance(answer.get(self.success_key), bool):
            return "refused"
        return "reset" if answer[self.success_key] else "busy"


@dataclass(frozen=True, slots=True)
class RankPin:
    """What pins one request to one data-parallel rank of an engine serving all its ranks behind one URL."""

    headers: Mapping[str, str] = field(default_factory=dict)
    """Headers to add to the request."""
    body: Mapping[str, Any] = field(default_factory=dict)
    """Top-level fields to add to the JSON body; empty: the body can be forwarded byte for byte."""


@dataclass(frozen=True, slots=True)
class SignalCheck:
    """One engine-neutral signal doctor checks for, and the metric names that carry it."""

    name: str
    """As operators say it: queue, running, KV usage, ..."""
    metrics: tuple[str, ...]
    """Current name first, then deprecated fallbacks :meth:`EngineAdapter.signals` still reads."""
    users: str
    """Who reads it (shown when it is missing)."""
    required: bool = True
    """Missing -> fail; else warn (routing still works, some decisions get worse)."""


@dataclass(frozen=True, slots=True)
class Diagnostics:
    """What ``infctl doctor`` checks on an engine of this kind, and the flags that fix what is wrong."""

    signals: tuple[SignalCheck, ...]
    deprecated: tuple[str, ...] = ()
    """Deprecated metric names the engine may still expose (warned about wherever they appear)."""
    deprecated_fix: str | None = None
    prefix_caching_fix: str = "enable prefix caching"
    metrics_flag_fix: str | None = None
    """The flag that turns /metrics on, for an engine that serves it only on request."""
    server_info_paths: tuple[str, ...] = ()
    """JSON endpoints describing the server's configuration, tried in order."""
    prefix_off_key: str | None = None
    """server-info key that is true when prefix caching is off."""
    metrics_on_key: str | None = None
    """server-info key that is true when /metrics is served."""


@dataclass(frozen=True, slots=True)
class SignalMetrics:
    """Which of the engine's metrics carries which signal, for alert rules and dashboards (PromQL)."""

    queue: str
    """Gauge: requests waiting (the engine's own queue; see :attr:`more_queues`)."""
    running: str
    """Gauge: requests running."""
    kv_usage: str
    """Gauge, 0..1."""
    ttft: str
    """Histogram family."""
    ttft_buckets: tuple[float, ...]
    """Bucket bounds of ``ttft`` (an SLO alert counts below the largest bound under the SLO)."""
    itl: str
    """Histogram family: inter-token latency."""
    e2e: str
    """Histogram family: whole-request latency."""
    prompt_tokens: str
    """Counter (sample name)."""
    generation_tokens: str
    """Counter (sample name)."""
    model_label: str
    """The label carrying the served model name."""
    more_queues: tuple[str, ...] = ()
    """Gauges of requests the engine holds and does not compute yet, outside :attr:`queue`: the requests
    waiting are the sum of :attr:`queues` (as the adapter's ``signals`` read them from a scrape)."""
    copy_labels: tuple[str, ...] = ("tp_rank", "pp_rank")
    """Labels telling apart copies of one rank's gauge (taken once, the largest). The default is a no-op
    for an engine whose workers export no gauges of their own."""
    share_label: str | None = None
    """A label whose non-empty values mark a share of the total beside it (under the empty value)."""
    busy: tuple[str, ...] = ()
    """Gauges of work in progress besides the running and waiting requests, which an engine must finish
    before it stops (its preStop hook waits for them): an SGLang PD prefill's requests whose KV is being
    sent, for instance."""

    @property
    def queues(self) -> tuple[str, ...]:
        """Every gauge counted as waiting requests: :attr:`queue` and :attr:`more_queues`."""
        return (self.queue, *self.more_queues)


@dataclass(frozen=True, slots=True)
class ProfileRules:
    """What the engine-neutral model profile may ask of this engine: what ``infctl.config`` checks a profile
    against once it knows the engine (each refusal names the field and the fix)."""

    pd_fields: frozenset[str]
    """The ``pd`` fields the engine reads; another engine's field set in a profile is refused."""
    pd_hint: str
    """How the engine picks its KV transfer (the fix shown when another engine's ``pd`` field is set)."""
    offload_backends: tuple[str, ...]
    """The ``kv_offload.backend`` values the engine runs."""
    refused_kv_connectors: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    """``pd.kv_connector`` values the engine reads but infctl refuses: value -> (why, the fix)."""
    dp_attention: bool = False
    """Whether the engine has a data-parallel attention switch (``dp_attention``)."""
    dp_attention_hint: str | None = None
    """Without the switch: why the engine does not need it (the fix shown when a profile sets it)."""


@dataclass(frozen=True, slots=True)
class MultiNodeArgs:
    """What makes several pods one engine replica (one LeaderWorkerSet group)."""

    args: tuple[str, ...]
    """Appended to :meth:`EngineAdapter.launch_command`'s argv."""
    shell_suffix: str = ""
    """Appended unquoted when the argv needs shell arithmetic (then run through ``/bin/sh -c``)."""


ROOM_RANK_STRIDE = 2**8 * 3**2 * 5 * 7 * 11 * 13
"""The fallback when the engine's rank count is unknown: rooms for data-parallel rank r are r + k * this, so
that ``room % n == r`` for every rank count n that divides it (every n up to 16, and 18, 20, 24, 32, 48, 64,
96, 128, 256...; not 17, 19, 23, 25...)."""


def new_bootstrap_room(
    rng: random.Random | None = None, *, rank: int | None = None, ranks: int | None = None
) -> int:
    """A random 63-bit rendezvous id for a parallel-style PD request (SGLang ``bootstrap_room``).

    With ``rank``, the data-parallel rank of the prefill engine the request is pinned to, one with
    ``room % ranks == rank``: ``rank + k * ranks`` when the engine's rank count ``ranks`` is known, for any
    count; without it, ``rank + k *`` :data:`ROOM_RANK_STRIDE`, right only for counts that divide the stride
    (the caller warns). SGLang picks a PD prefill's rank from the room: by default (``--load-balance-method
    auto``) a prefill engine dispatches each request to rank ``bootstrap_room % len(workers)``
    (``follow_bootstrap_room``), its rank count (0.5.15: ``dp_size``; 0.5.23: ``dp_size * attn_dp_size``,
    ``num_dp_ranks``), and its decode engines look for the KV on that rank; a request pinned
    (``routed_dp_rank``) to another rank fails its transfer ("follow_bootstrap_room conflict", unless both
    sides set ``SGLANG_DISAGGREGATION_FORCE_QUERY_PREFILL_DP_RANK=1``). Read in 0.5.15 and 0.5.23:
    ``srt/managers/data_parallel_controller.py``, ``srt/disaggregation/common/conn.py`` (``CommonKVSender``),
    ``srt/disaggregation/decode.py`` (``_resolve_prefill_dp_rank``).

    A request with n > 1 samples keeps the pinned rank: ``GenerateReqInput`` expands an integer room to
    ``room + i`` over its n slots, but ``TokenizerManager._handle_batch_request`` sends the prefix warm-up and
    every sample as a copy of the prompt's own sub-request (``objs[i]``, slot i < batch size), so all of them
    carry ``room`` itself (0.5.15 and 0.5.23, ``srt/managers/io_struct.py``, ``tokenizer_manager.py``). A list
    of rooms does no better (one per prompt, repeated over the samples). That shared room is also why n > 1
    does not work through SGLang PD in these releases: the samples' KV transfers collide in one room
    (sglang#24223, #26486, #30723), which no choice of room by the router can undo."""
    if rank is None:
        return rng.getrandbits(63) if rng is not None else random.getrandbits(63)
    stride = ROOM_RANK_STRIDE if ranks is None else ranks
    if stride < 1:
        raise ValueError(f"data-parallel rank count {ranks} is out of range")
    if not 0 <= rank < stride:
        raise ValueError(f"data-parallel rank {rank} is out of range (0..{stride - 1})")
    randrange = rng.randrange if rng is not None else random.randrange
    return rank + stride * randrange((2**63 - rank) // stride)


__all__ = [
    "ROOM_RANK_STRIDE",
    "Body",
    "CacheReset",
    "CacheResetOutcome",
    "Diagnostics",
    "HealthSpec",
    "MultiNodeArgs",
    "PDEndpoint",
    "PDStyle",
    "ProfileRules",
    "RankPin",
    "Role",
    "SignalCheck",
    "SignalMetrics",
    "new_bootstrap_room",
]
