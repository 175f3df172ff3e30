"""The router's own file (``infctl router -f router.yaml``): listener, backends, policy, intervals."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field, model_validator

from infctl.config._base import Count, Port, Problem, ProfileModel, raise_problems
from infctl.config._engine import EngineName
from infctl.engines import DEFAULT_ENGINE
from infctl.errors import ConfigError

Seconds = Annotated[float, Field(gt=0)]
ListenPort = Annotated[int, Field(ge=0, le=65535)]

ADMIN_TOKEN_ENV = "INFCTL_ROUTER_ADMIN_TOKEN"
"""The environment variable holding the router's admin bearer token when the router file names no other
(``admin_token_env``); what rendered and local routers are given, and where the autoscaler, cutover and
doctor read the token to call the admin API. Its one definition: everything else imports it."""


def check_engine_url(url: str) -> str:
    """An engine's base URL is ``http(s)://host[:port]``. Refused here, for the router file, ``--backend``
    and ``POST /admin/backends`` alike: a bare ``host:port`` would start, fail its first probe and sit
    ejected."""
    parts = urlsplit(url)
    try:
        parts.port  # noqa: B018 (raises ValueError on a bad port)
    except ValueError as exc:
        raise ValueError(f"{exc} in {url!r}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"expected http(s)://host[:port], found {url!r}")
    return url


BaseURL = Annotated[str, AfterValidator(check_engine_url)]
"""``http(s)://host[:port]``, by the one rule every URL flag and the router's backends follow."""


def parse_url_spec(spec: str, *, flag: str, keys: Sequence[str]) -> dict[str, str]:
    """An engine as a flag names it, ``URL[,key=value...]`` (``--backend``, doctor's ``--engine-url``) ->
    ``{"url": URL, key: value}``; a ConfigError naming the flag and the part it cannot read (a pair without
    ``=`` or a key not in ``keys``). The URL and the values are the caller's to check."""
    url, *pairs = [p.strip() for p in spec.split(",")]
    out = {"url": url}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or key not in keys:
            raise ConfigError(
                f"{flag} {spec}: cannot read {pair!r}",
                hint=f"use URL[,key=value...] with keys {', '.join(keys)}",
            )
        out[key] = value
    return out


class BackendEntry(ProfileModel):
    """One engine (or one data-parallel rank of an engine) the router sends requests to."""

    url: BaseURL
    """Base URL of the engine, e.g. ``http://10.0.0.7:8000``."""
    id: str | None = None
    """Stable id (keys the prefix index). Default: the URL, plus ``#dpN`` when ``dp_rank`` is set."""
    role: Literal["prefill", "decode", "both"] = "both"
    """PD role. Default both (aggregated)."""
    group: str | None = None
    """PD group; prefill and decode pair inside one group in group mode."""
    pool: str | None = None
    """Pool name that length buckets map to."""
    upstream: str = "default"
    """Upstream group for weighted splits (cutover old/new)."""
    engine: EngineName | None = None
    """Engine kind; default the file's ``engine``."""
    dp_rank: Annotated[int, Field(ge=0)] | None = None
    """Data-parallel rank this entry pins (sent in the engine's DP-rank header; for an SGLang PD prefill it
    also picks the bootstrap room, which SGLang maps to a rank)."""
    dp_size: Count | None = None
    """With ``dp_rank``: how many data-parallel ranks the engine serves (SGLang's ``/server_info``:
    ``dp_size``, times ``attn_dp_size`` from 0.5.22). An SGLang PD prefill's bootstrap room must leave
    ``dp_rank`` as its remainder by this count; unset, the router draws rooms right for counts up to 16 and
    many more, and counts each such room (``infctl_router_pd_rooms_without_dp_size_total``). Once an SGLang
    PD prefill's engine reports its own count, the router uses that one and warns when it differs from this
    (``infctl.router.engine_ranks``; ``/admin/backends`` shows ``dp_size_given`` and ``dp_size_engine``)."""
    weight: Annotated[float, Field(gt=0)] = 1.0
    """Relative capacity. Default 1."""
    models: list[str] = Field(default_factory=list)
    """Models served; empty means any."""
    kv_events: str | None = None
    """ZMQ endpoint of the engine's KV-cache events (e.g. ``tcp://10.0.0.7:5557``), for precise routing."""
    bootstrap_port: Port | None = None
    """SGLang PD prefill: its ``--disaggregation-bootstrap-port``, sent in each request's ``bootstrap_port``.
    Default: the engine's default (8998), what a profile's ``pd.bootstrap_port`` is unless changed."""

    @model_validator(mode="after")
    def _rank_within_size(self) -> BackendEntry:
        if self.dp_size is not None and (self.dp_rank is None or self.dp_rank >= self.dp_size):
            rank = "no dp_rank" if self.dp_rank is None else f"dp_rank {self.dp_rank}"
            problem = f"dp_size {self.dp_size} with {rank}: expected a dp_rank below it"
            raise_problems([Problem(("dp_size",), problem)])
        return self


class DiscoverySettings(ProfileModel):
    """Find engines as ready Kubernetes pods (watched, not polled)."""

    namespace: str
    """Namespace of the engine pods."""
    selector: str
    """Label selector, e.g. ``infctl.io/release=ds3,app.kubernetes.io/component=engine``."""
    port: Port = 8000
    """Engine HTTP port when the pod names no container port ``http``. Default 8000."""
    watch_timeout_s: Annotated[int, Field(ge=1)] = 300
    """How long the API server holds one watch request, seconds; the next resumes where it ended.
    Default 300."""
    retry_max_s: Seconds = 30.0
    """Longest wait between retries while the API server is unreachable or refusing, seconds. Default 30."""
    engine: EngineName | None = None
    """Engine of pods without an ``infctl.io/engine`` label. Default: the file's ``engine``."""


class HealthPolicy(ProfileModel):
    """Passive ejection and re-admission of failing backends (``infctl.router.health``)."""

    failures_to_eject: Count = 3
    """Consecutive non-fatal failures (5xx, timeouts) that eject a backend. Default 3."""
    base_backoff_s: Seconds = 1.0
    """Time out of rotation after the first ejection, seconds; doubles with each ejection. Default 1."""
    max_backoff_s: Seconds = 30.0
    """Ceiling of the doubling backoff, seconds. Default 30."""
    stable_after_s: Seconds = 60.0
    """Seconds of health after re-admission that reset the backoff to ``base_backoff_s``. Default 60."""


class RouterOptions(ProfileModel):
    """Every router setting but where the engines are and the admin token: the one declaration of each
    default and its doc. :class:`RouterFile` (the YAML, and the flags laid over it) and
    ``infctl.router.config.RouterConfig`` (what the daemon runs on) both derive from it, and
    ``infctl router --help`` reads its field docs, so no default is written twice."""

    policy: str | dict[str, Any] = "cache_aware"
    """A preset (round_robin, random, weighted, least_load, power_of_two, session, kv_usage, prefix,
    prefix_precise, cache_aware) or a policy mapping (filters, scorers, picker, index, settings, buckets,
    upstreams; see ``infctl.router.policies.pipeline``). Default cache_aware."""
    host: str = "127.0.0.1"
    """Listen address. Default 127.0.0.1 (use 0.0.0.0 in a pod)."""
    server: Literal["aiohttp", "lean"] = "lean"
    """The HTTP front: ``aiohttp`` serves everything; ``lean`` parses the two generation POSTs itself (a
    shorter path to the first token) and hands every other request to aiohttp on the same connection.
    ``--server`` wins over it. Default lean (``bench_router_overhead.py``: added TTFT p50 lower, p99 no
    different, paired per round)."""
    port: ListenPort = 8000
    """Listen port (0: one the system picks, reported once listening). Default 8000."""
    engine: EngineName = DEFAULT_ENGINE
    """Engine kind of backends that do not name one. Default vllm (``infctl.engines.DEFAULT_ENGINE``)."""
    scrape_interval_s: Seconds = 0.1
    """Engine /metrics scrape interval, seconds. Default 0.1."""
    health_interval_s: Seconds = 1.0
    """Active health probe interval, seconds (it also bounds ejection-to-readmission). Default 1."""
    probe_timeout_s: Seconds = 2.0
    """Active health probe timeout, seconds; a timed-out probe counts toward ejection, a refused one ejects.
    Default 2."""
    health: HealthPolicy = Field(default_factory=HealthPolicy)
    """Passive ejection and backoff (failures_to_eject, base_backoff_s, max_backoff_s, stable_after_s)."""
    connect_timeout_s: Seconds = 2.0
    """Upstream connect timeout, seconds; a timeout counts as a fatal failure of that backend. Default 2."""
    read_timeout_s: Seconds = 600.0
    """Longest silence allowed between upstream bytes, seconds. Default 600."""
    max_body_bytes: Count = 8 * 1024 * 1024
    """Largest request body accepted, bytes (413 above). Default 8 MiB."""
    header_timeout_s: Seconds = 10.0
    """Lean front: a request head must arrive whole within this many seconds of its first byte, else the
    connection gets a 408 and is closed (a client trickling its head cannot hold a socket). Connections
    aiohttp serves (its front, and those the lean front hands over) are closed when no whole head has
    arrived this long after their last answer: idle keep-alive connections too (aiohttp has one timer for
    both; with ``server: aiohttp``, raise it above your clients' keep-alive idle time). Default 10."""
    keepalive_timeout_s: Seconds = 75.0
    """Lean front: seconds an idle keep-alive connection is kept after its last answer. Longer than most
    clients keep one idle (aiohttp's 15 s), so that the client, not the router, ends it: a request sent on
    a connection the router is closing at that moment gets a disconnect, and not every client retries a
    POST. Default 75 (aiohttp's server and nginx)."""
    body_timeout_s: Seconds = 30.0
    """Lean front: a generation request's body must arrive whole within this many seconds of its head
    (408 and closed otherwise). Default 30."""
    max_connections: Count = 10_000
    """Lean front: client connections open at once, those handed to aiohttp included. At the limit the
    longest-idle keep-alive connection is closed to make room; with none idle, a new connection gets a 503
    and is closed. Keep it under half the process's open-file limit (``ulimit -n``): each request in
    flight holds a client and an upstream socket. Default 10,000."""
    max_prompt_chars: Count = 2_000_000
    """Longest prompt accepted, in characters of prompt text (or token ids of a pre-tokenised prompt),
    checked on the raw length before the prompt is tokenised (413 above), so no prompt holds the event loop
    for long: at the default, reading a prompt costs ~5 ms (count only) to ~85 ms (token ids and block
    hashes) on one core (``benchmarks/bench_token_count.py``); an 8 MB prompt used to block it ~0.7 s.
    Default 2,000,000 (~500k tokens of English)."""
    max_attempts: Count = 3
    """Backends tried per request while nothing has reached the client (first try included). Default 3."""
    block_size: Count = 16
    """Tokens per prefix-hash block; match the engines' KV block size. Default 16."""
    tokenizer: str = "auto"
    """How prompts are counted and hashed: the model's tokenizer (a model directory, a tokenizer.json or a
    Hugging Face id), ``engine`` (exact, no files: the backends' own vLLM /tokenize, remembered per prompt;
    or ``engine:URL[,URL...]``), ``estimate`` (language-independent, by bytes and characters), ``words`` (the
    simulator's convention, for ``infctl sim`` backends) or ``auto`` (the estimate, announced at start-up).
    Only the model's tokenizer or the engine's makes counts exact and lets the precise index match KV
    events. Default auto."""
    session_header: Annotated[str, AfterValidator(str.lower)] = "x-session-id"
    """Header that keys session affinity (case-insensitive). Default x-session-id."""
    pd_mode: Literal["group", "pool"] = "group"
    """How prefill and decode pair. Default group."""
    pd_min_uncached_tokens: Annotated[int, Field(ge=0)] = 512
    """Disaggregate only above this many uncached prompt tokens. Default 512."""
    pd_cross_group_cost: Annotated[float, Field(ge=0)] = 0.108
    """Pool mode: prefill-token equivalents per KV token a decode backend outside the prefill backend's
    group must receive over the slower link between groups (0 ignores the link). Default 0.108
    (DeepSeek-V3 on H200: kv_bytes_per_token x (1/cross_bw - 1/group_bw) / prefill seconds per token)."""
    insecure_admin: bool = False
    """Start even with no admin token on a non-loopback ``host`` (anyone who reaches the router can then
    add backends and move traffic). ``--insecure-admin``. Default false: the router refuses to start."""
    drain_timeout_s: Seconds = 30.0
    """Grace for in-flight requests on SIGTERM, seconds. Default 30."""
    admission_queue: Annotated[int, Field(ge=0)] = 1024
    """Requests held while their backends are saturated (0 turns admission control off). Default 1024."""
    admission_deadline_s: Seconds = 30.0
    """Longest a request waits for capacity before a 429, seconds. Default 30."""
    hold_when_empty_s: Annotated[float, Field(ge=0)] = 0.0
    """Scale-to-zero: a request whose pool (or the whole fleet) has no backend at all waits in the admission
    queue up to this long, seconds, for one to appear (the autoscaler wakes the pool on it; discovery or the
    admin API adds the engine), then is routed; a 503 with ``Retry-After`` if none appears. Set it above an
    engine's start-up time. Needs ``admission_queue`` >= 1. Default 0: a 503 at once."""
    short_prompt_tokens: Annotated[int, Field(ge=0)] = 2048
    """Without length buckets: prompts up to this many tokens leave the admission queue first (with
    buckets, the first bucket's ``max_tokens`` decides). Default 2048."""
    trust_request_chat_template: bool = False
    """The engines render a chat request's own template (vLLM's ``--trust-request-chat-template``), so the
    router counts and hashes the prompt with it (a request's ``chat_template``, or its
    ``chat_template_kwargs``' one), in a worker thread. False: the router ignores such a template and
    renders the model's (the engines refuse the request with a 400 anyway, as vLLM 0.32 does without the
    flag), so no client makes it run templates. ``--trust-request-chat-template``; the local target and the
    manifests set it from the model's ``extra_args``. Default false (vLLM's)."""


class RouterFile(RouterOptions):
    """Full router configuration: ``backends``, ``discovery`` or both; every other key is optional."""

    backends: list[BackendEntry] = Field(default_factory=list)
    """Static engines to route to."""
    discovery: DiscoverySettings | None = None
    """Kubernetes discovery of engine pods (role, group, pool and engine from their labels)."""
    admin_token_env: str | None = None
    """Name of the environment variable holding the admin bearer token (never the token itself); required
    to be set when named. None: ``INFCTL_ROUTER_ADMIN_TOKEN`` if set, else an open admin API, which the
    router serves on a loopback ``host`` only."""

    @model_validator(mode="after")
    def _some_backends(self) -> RouterFile:
        if not self.backends and self.discovery is None:
            raise_problems([Problem(("backends",), "expected at least one backend, or a discovery section")])
        return self


def router_default(name: str) -> Any:
    """The default of router setting ``name`` (for code that mirrors the router, such as the simulator)."""
    return RouterOptions.model_fields[name].get_default(call_default_factory=True)
