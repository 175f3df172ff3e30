"""What every engine adapter provides, and the engine-neutral records its functions exchange.

An adapter is the only place that knows an engine's metric names, HTTP paths, PD wire protocol, command
line (multi-node flags and the host ports it binds included), what a profile may ask of it and what doctor
checks on it. Everything here is pure: adapters build dicts and argument lists, they never do I/O.
The telemetry package does the scraping (``infctl.telemetry.scrape``); the router calls
``prefill_body``/``decode_body``; the local target and the manifests call ``launch_command``; the profiles
check themselves against ``profile_rules``; alert rules and dashboards read ``signal_metrics``; the bench
empties prefix caches through ``cache_reset``.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from infctl.engines.versions import Version
from infctl.telemetry.prometheus import MetricFamilies
from infctl.telemetry.signals import EngineSignals, LoadReport

if TYPE_CHECKING:
    from infctl.config.model import ModelProfile

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


class EngineAdapter(Protocol):
    """One engine's surfaces. Implementations are stateless; module-level singletons are fine."""

    @property
    def name(self) -> str:
        """Registry key and ``ModelProfile.engine`` value: ``vllm``, ``sglang``."""
        ...

    @property
    def metrics_path(self) -> str: ...

    @property
    def metrics_hint(self) -> str:
        """What to check when /metrics cannot be read (e.g. SGLang needs ``--enable-metrics``)."""
        ...

    @property
    def wanted_metrics(self) -> frozenset[str]:
        """Every sample name :meth:`signals` reads; pass it to ``parse_metrics`` as the filter."""
        ...

    @property
    def health(self) -> HealthSpec: ...

    @property
    def load_paths(self) -> tuple[str, ...]:
        """Load endpoints to try in order (a 404 moves on to the next); empty when there is none."""
        ...

    @property
    def cache_reset(self) -> CacheReset:
        """How to empty the engine's prefix cache (and what the engine must be started with for it)."""
        ...

    @property
    def pd_style(self) -> PDStyle: ...

    @property
    def decode_serves_alone(self) -> bool:
        """Whether a PD decode engine (role ``decode``) also serves a request sent without its prefill leg,
        prefilling it itself. The router sends short prompts to such a decode engine alone; one that
        refuses them only ever gets requests paired with a prefill engine (or, with none, an aggregated
        engine takes them)."""
        ...

    @property
    def dp_rank_header(self) -> str | None:
        """Request header that pins a request to one data-parallel rank, if the engine has one (part of
        :meth:`pin_rank`, which says everything a pin needs)."""
        ...

    @property
    def dp_rank_label(self) -> str:
        """Metric label that tells a data-parallel engine's per-rank series apart (one /metrics for all
        ranks); series without it are engine-wide."""
        ...

    @property
    def default_image(self) -> str:
        """Container image used when the profile names none."""
        ...

    @property
    def flag_versions(self) -> Mapping[str, Version]:
        """Flag (or ``flag=value fragment``) -> the first release of the engine that accepts it, for every
        flag :meth:`launch_command` may emit that is younger than :attr:`oldest_checked`
        (:mod:`infctl.engines.versions`)."""
        ...

    @property
    def oldest_checked(self) -> Version:
        """The oldest release the flag table was checked against; images before it are refused."""
        ...

    @property
    def diagnostics(self) -> Diagnostics:
        """What doctor checks on this engine."""
        ...

    @property
    def signal_metrics(self) -> SignalMetrics:
        """Which metric carries which signal, for the alert rules and dashboards ``infctl render`` writes."""
        ...

    @property
    def profile_rules(self) -> ProfileRules:
        """What a model profile may ask of this engine (checked when the profile loads)."""
        ...

    def signals(self, families: MetricFamilies) -> EngineSignals:
        """Engine-neutral signals from parsed /metrics (filtered with :attr:`wanted_metrics` or not)."""
        ...

    def parse_load(self, body: object) -> LoadReport:
        """Parse the JSON body of one of :attr:`load_paths`; raises ``EngineError`` on a foreign shape."""
        ...

    def prefill_body(
        self, body: Mapping[str, Any], prefill: PDEndpoint, room: int | Sequence[int] | None = None
    ) -> Body:
        """The request body for the prefill leg (a new dict; ``body`` is not modified)."""
        ...

    def decode_body(
        self,
        body: Mapping[str, Any],
        prefill_response: Mapping[str, Any] | None,
        prefill: PDEndpoint,
        room: int | Sequence[int] | None = None,
    ) -> Body:
        """The request body for the decode leg.

        Sequential style needs ``prefill_response`` (the prefill leg's parsed JSON); parallel style
        needs ``room`` (the same one given to :meth:`prefill_body`) and ignores the response: a list of
        rooms, one per prompt, for a completion batch (``sglang_pd``).
        """
        ...

    def pin_rank(self, rank: int) -> RankPin:
        """How to send a request so that data-parallel rank ``rank`` (0-based) serves it."""
        ...

    def dp_ranks(self, model: ModelProfile, role: Role) -> int:
        """How many data-parallel ranks the engine :meth:`launch_command` starts for ``model`` in ``role``
        serves behind its port, as the engine resolves that command line (``extra_args`` included): what
        render labels its pods with and the router makes one backend of each (the ranks a request may be
        pinned to, the count an SGLang PD prefill's bootstrap rooms are drawn modulo)."""
        ...

    def reported_dp_ranks(self, info: object) -> int | None:
        """The data-parallel rank count in a body of ``diagnostics.server_info_paths``, which the router
        reads where rooms depend on it; None when the engine reports none there."""
        ...

    def launch_command(
        self, model: ModelProfile, *, role: Role, port: int, host: str = "0.0.0.0"
    ) -> list[str]:
        """argv that starts one engine replica serving ``model`` in ``role`` on ``host:port``."""
        ...

    def launch_env(self, model: ModelProfile, role: Role) -> dict[str, str]:
        """Environment variables the engine needs for ``model`` (the profile's own ``env`` included)."""
        ...

    def pod_ip_env(self, model: ModelProfile, role: Role) -> tuple[str, ...]:
        """Environment variables that must hold the address of the engine's own pod on Kubernetes (an
        address the engine advertises to its peers; rendered from the downward API's ``status.podIP``).
        Locally the runner sets them to the loopback address it binds."""
        ...

    def multinode_args(
        self, model: ModelProfile, *, nodes: int, gpus_per_node: int, leader: bool
    ) -> MultiNodeArgs:
        """What to add to :meth:`launch_command` so that ``nodes`` pods (a LeaderWorkerSet group) are one
        replica: the leader (``leader``) serves HTTP, the workers run headless. Addresses are
        LeaderWorkerSet's variables and the rendezvous port (:mod:`infctl.engines.cmdline`)."""
        ...

    def host_port_runs(self, model: ModelProfile, role: Role) -> dict[str, int]:
        """The ports an engine of ``model`` in ``role`` binds at a fixed default (or at a fixed offset from
        its HTTP port), which engines side by side on one machine must each get their own of: name -> how
        many consecutive ports. Empty when it binds none (``infctl.local.engine_ports`` takes them)."""
        ...

    def host_port_args(self, ports: Mapping[str, int], host: str) -> list[str]:
        """The flags passing the ports :meth:`host_port_runs` asked for (each run's first port under its
        name; other names in ``ports`` are ignored), ``host`` being the address the engine binds."""
        ...

    def host_port_env(self, ports: Mapping[str, int], host: str) -> dict[str, str]:
        """The environment variables passing the ports :meth:`host_port_runs` asked for."""
        ...


__all__ = [
    "ROOM_RANK_STRIDE",
    "Body",
    "CacheReset",
    "CacheResetOutcome",
    "Diagnostics",
    "EngineAdapter",
    "EngineSignals",
    "HealthSpec",
    "LoadReport",
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
