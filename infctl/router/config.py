"""Settings of the router daemon (``infctl router``): where it listens, what it routes to, how often."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from infctl.config.router import RouterFile
from infctl.engines import DEFAULT_ENGINE
from infctl.router.discovery import DiscoverySettings
from infctl.router.health import HealthPolicy
from infctl.router.kv_events import KVSource
from infctl.router.ranks import backend_id, rank_endpoint
from infctl.router.snapshot import Backend

__all__ = ["RouterConfig", "backend_id", "from_file"]


@dataclass(frozen=True)
class RouterConfig:
    """Everything ``serve`` needs. Built by the CLI from flags or a ``-f router.yaml``."""

    backends: tuple[Backend, ...]
    """Static backends (engines, or one per data-parallel rank)."""
    policy: str | Mapping[str, Any] = "cache_aware"
    """A preset name or a policy dict (see ``infctl.router.policies.pipeline``)."""
    host: str = "127.0.0.1"
    port: int = 8000
    server: Literal["aiohttp", "lean"] = "lean"
    """The HTTP front: aiohttp, or the lean front (``infctl.router.front``) for the generation POSTs."""
    engine: str = DEFAULT_ENGINE
    """Engine adapter for backends that do not name one (metric names, health, PD protocol)."""
    scrape_interval_s: float = 0.1
    """How often every engine's /metrics is scraped, seconds."""
    health_interval_s: float = 1.0
    """How often every engine's health path is probed, seconds (also bounds ejection-to-readmission)."""
    probe_timeout_s: float = 2.0
    """Health probe timeout, seconds; a timed-out probe counts toward ejection, a refused one ejects."""
    connect_timeout_s: float = 2.0
    """Upstream connect timeout, seconds; a timeout counts as a fatal failure of that backend."""
    read_timeout_s: float = 600.0
    """Longest silence allowed between upstream bytes, seconds."""
    max_body_bytes: int = 8 * 1024 * 1024
    """Largest request body accepted, bytes; larger ones get 413."""
    header_timeout_s: float = 10.0
    """Lean front: seconds from a request head's first byte by which the whole head must have arrived
    (408 and closed otherwise). Connections aiohttp serves (its front, and those the lean front hands
    over) are closed when no whole head has arrived this long after their last answer: idle keep-alive
    connections too."""
    body_timeout_s: float = 30.0
    """Lean front: seconds from the end of a request's head by which its whole body must have arrived
    (408 and closed otherwise)."""
    max_connections: int = 10_000
    """Lean front: client connections open at once (those handed to aiohttp included); at the limit the
    longest-idle one is closed to make room, else the newcomer gets a 503."""
    max_prompt_chars: int = 2_000_000
    """Longest prompt accepted: characters of prompt text, or token ids of a pre-tokenised prompt. Checked
    on the raw length before tokenising (413 above), so no prompt holds the event loop for long: at the
    default, reading a prompt costs ~5 ms (count only) to ~85 ms (token ids and block hashes) on one core
    (``benchmarks/bench_token_count.py``); an 8 MB prompt used to block it ~0.7 s."""
    max_attempts: int = 3
    """Backends tried per request while nothing has reached the client (first try included)."""
    block_size: int = 16
    """Tokens per block for prefix hashes (match the engines' KV block size for precise routing)."""
    tokenizer: str = "auto"
    """What counts and hashes prompts (``infctl.tokenization.load_tokenizer``): a model directory,
    tokenizer.json or Hugging Face id; ``estimate``; ``words``; ``auto`` (the estimate)."""
    session_header: str = "x-session-id"
    """Header whose value keys session affinity."""
    pd_mode: Literal["group", "pool"] = "group"
    """How prefill and decode backends pair when both roles are present."""
    pd_min_uncached_tokens: int = 512
    """Disaggregate only when more prompt tokens than this are uncached on the decode side."""
    pd_cross_group_cost: float = 0.108
    """Pool mode: what a decode backend outside the prefill's group pays (``PDSettings.cross_group_cost``)."""
    admin_token: str | None = None
    """Bearer token required by /admin/*; None leaves the admin API open, which ``serve`` allows on a
    loopback ``host`` only (unless ``insecure_admin``)."""
    insecure_admin: bool = False
    """Serve an admin API without a token on a non-loopback ``host`` (refused otherwise)."""
    drain_timeout_s: float = 30.0
    """On SIGTERM, how long in-flight requests may run before the router exits, seconds."""
    health: HealthPolicy = field(default_factory=HealthPolicy)
    """Passive ejection and backoff settings."""
    admission_queue: int = 1024
    """Requests held while their backends are saturated (0 turns admission control off)."""
    admission_deadline_s: float = 30.0
    """Longest a request waits for capacity before a 429, seconds."""
    short_prompt_tokens: int = 2048
    """Prompts up to this many tokens are released first from the admission queue when the policy has no
    length buckets (with buckets, the bucket's rank is the priority)."""
    discovery: DiscoverySettings | None = None
    """Kubernetes discovery of engine pods, when configured."""
    kv_sources: tuple[KVSource, ...] = ()
    """Engines' KV-event publishers feeding the precise prefix index."""


def from_file(rf: RouterFile, *, admin_token: str | None = None) -> RouterConfig:
    """The daemon's settings from a validated router file (or flags turned into one).

    A backend's ``kv_events`` is its engine's base endpoint: an entry pinning data-parallel rank r
    subscribes the base port + r, where vLLM and SGLang publish that rank's events (as discovery does).
    Entries naming the same endpoint share one subscription."""
    ids = [b.id or backend_id(b.url.rstrip("/"), b.dp_rank) for b in rf.backends]
    sources: dict[str, dict[int | None, str]] = {}
    for b, bid in zip(rf.backends, ids, strict=True):
        if b.kv_events:
            by_rank = sources.setdefault(rank_endpoint(b.kv_events, b.dp_rank), {})
            by_rank[b.dp_rank] = bid
            if b.dp_rank is not None:
                by_rank.setdefault(None, bid)  # a rank's own publisher: its events may not name the rank
    backends = tuple(
        Backend(
            id=bid,
            url=b.url.rstrip("/"),
            role=b.role,
            group=b.group,
            pool=b.pool,
            upstream=b.upstream,
            engine=b.engine or rf.engine,
            dp_rank=b.dp_rank,
            weight=b.weight,
            models=tuple(b.models),
            bootstrap_port=b.bootstrap_port,
        )
        for b, bid in zip(rf.backends, ids, strict=True)
    )
    # The file and the daemon share most settings by name; the file validates them, the daemon runs on them.
    shared = {f.name: getattr(rf, f.name) for f in fields(RouterConfig) if f.name in RouterFile.model_fields}
    shared["session_header"] = rf.session_header.lower()
    shared["health"] = HealthPolicy(**rf.health.model_dump())
    del shared["backends"], shared["discovery"]
    d = rf.discovery
    if d is not None:
        shared["discovery"] = DiscoverySettings(
            d.namespace, d.selector, d.port, rf.engine, d.watch_timeout_s, d.retry_max_s
        )
    return RouterConfig(
        **shared,
        backends=backends,
        admin_token=admin_token,
        kv_sources=tuple(KVSource(endpoint=e, backends=m) for e, m in sources.items()),
    )
