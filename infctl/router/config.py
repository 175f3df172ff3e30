"""Settings of the router daemon (``infctl router``): where it listens, what it routes to, how often."""

from __future__ import annotations

from pydantic import ConfigDict

from infctl.config.router import BackendEntry, DiscoverySettings, RouterFile, RouterOptions
from infctl.router.kv_events import KVSource
from infctl.router.ranks import backend_id, rank_endpoint
from infctl.router.snapshot import Backend

__all__ = ["RouterConfig", "backend_id", "from_file"]


class RouterConfig(RouterOptions):
    """Everything ``serve`` needs: every setting of :class:`RouterOptions` (declared there once, with its
    default and doc, for the file, the flags and the daemon alike) plus the engines as the daemon sees them.
    Built by the CLI from flags or a ``-f router.yaml`` (:func:`from_file`); tests build it directly."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    backends: tuple[Backend, ...]
    """Static backends (engines, or one per data-parallel rank)."""
    discovery: DiscoverySettings | None = None
    """Kubernetes discovery of engine pods, its ``engine`` resolved to the file's when unset."""
    kv_sources: tuple[KVSource, ...] = ()
    """Engines' KV-event publishers feeding the precise prefix index."""
    admin_token: str | None = None
    """Bearer token required by /admin/*; None leaves the admin API open, which ``serve`` allows on a
    loopback ``host`` only (unless ``insecure_admin``)."""


def backend_of(entry: BackendEntry, backend_id: str, *, engine: str = "") -> Backend:
    """The routing target a router file's (or the admin API's) backend entry describes; ``engine`` when
    the entry names none. Every field of the entry but ``id`` and ``kv_events`` is one of the target's."""
    return Backend(
        id=backend_id,
        url=entry.url.rstrip("/"),
        role=entry.role,
        group=entry.group,
        pool=entry.pool,
        upstream=entry.upstream,
        engine=entry.engine or engine,
        dp_rank=entry.dp_rank,
        dp_size=entry.dp_size,
        weight=entry.weight,
        models=tuple(entry.models),
        bootstrap_port=entry.bootstrap_port,
    )


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
    backends = tuple(backend_of(b, bid, engine=rf.engine) for b, bid in zip(rf.backends, ids, strict=True))
    d = rf.discovery
    return RouterConfig(
        **{name: getattr(rf, name) for name in RouterOptions.model_fields},
        backends=backends,
        discovery=None if d is None else d.model_copy(update={"engine": d.engine or rf.engine}),
        admin_token=admin_token,
        kv_sources=tuple(KVSource(endpoint=e, backends=m) for e, m in sources.items()),
    )
