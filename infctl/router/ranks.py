"""Engine signals per routing target, including each rank of a data-parallel engine.

A data-parallel engine serves all its ranks behind one URL and one ``/metrics``; the router makes each rank
its own target (a :class:`~infctl.router.snapshot.Backend` with ``dp_rank``, pinned the engine's way:
``EngineAdapter.pin_rank``), so each rank needs its own load, not the engine's sum. The engines label their
per-rank series, and the adapter names the label (``EngineAdapter.dp_rank_label``): vLLM every sample with
``engine``, SGLang its scheduler gauges with ``dp_rank``. One scrape per URL is split by that label; samples
without it (engine-wide series such as SGLang's tokenizer counters) go to every rank. A URL whose scrape
carries no rank label (one rank, or an engine that does not label them) gives every rank the engine's own
signals.

A rank's KV capacity is its own pool, except where the engine writes the whole engine's on every rank's
series (``EngineAdapter.rank_capacity_is_engine_total``, vLLM): each rank then gets an equal share of it, the
engine's over the ranks its scrape labels, so that a rank's usage times its capacity counts its own tokens.

The id of a rank's target is :func:`backend_id` (``URL#dpN``), and its KV events come from
:func:`rank_endpoint` (base port + rank): the one home of both conventions, used by static backends
(``infctl.router.config``) and discovered ones (``infctl.router.discovery``) alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from infctl.engines import EngineAdapter, RankPin, get_adapter
from infctl.errors import ConfigError, MetricsError
from infctl.router.snapshot import Backend
from infctl.telemetry.prometheus import MetricFamilies
from infctl.telemetry.scrape import Client, MetricsSource, scrape_many
from infctl.telemetry.signals import EngineSignals


def backend_id(url: str, dp_rank: int | None) -> str:
    """The routing target's id: the engine URL, plus ``#dpN`` for data-parallel rank N."""
    return url if dp_rank is None else f"{url}#dp{dp_rank}"


def rank_endpoint(endpoint: str, dp_rank: int | None) -> str:
    """Where rank ``dp_rank`` publishes KV events when the engine's base endpoint is ``endpoint``: vLLM and
    SGLang bind one publisher per data-parallel rank, on the base port + rank (``tcp://h:5557`` -> rank 2
    on ``tcp://h:5559``). A whole engine (rank None) publishes on ``endpoint`` itself.

    Raises ConfigError when a rank is given and ``endpoint`` ends in no port."""
    if dp_rank is None:
        return endpoint
    base, colon, port = endpoint.rpartition(":")
    if not colon or not port.isdigit() or "//" not in base:
        raise ConfigError(
            f"kv_events {endpoint!r}: expected tcp://HOST:PORT",
            hint="a data-parallel rank subscribes the base port + its rank, so the endpoint needs a port",
        )
    return f"{base}:{int(port) + dp_rank}"


@dataclass(frozen=True, slots=True)
class Target:
    """One routing target to scrape: its backend id, engine URL, DP rank (None: the whole engine)."""

    backend_id: str
    url: str
    dp_rank: int | None
    adapter: EngineAdapter


def split_by_rank(
    families: MetricFamilies, ranks: Iterable[int], label: str
) -> dict[int, MetricFamilies] | None:
    """``families`` cut into one set per rank (samples whose ``label`` is that rank, plus those without
    ``label``); None when no sample carries ``label``."""
    if not any(label in s.labels for samples in families.values() for s in samples):
        return None
    out: dict[int, MetricFamilies] = {}
    for rank in ranks:
        want = str(rank)
        picked: MetricFamilies = {}
        for name, samples in families.items():
            kept = [s for s in samples if s.labels.get(label, want) == want]
            if kept:
                picked[name] = kept
        out[rank] = picked
    return out


def _rank_values(families: MetricFamilies, label: str) -> set[str]:
    """The ranks a scrape labels with ``label``."""
    return {s.labels[label] for samples in families.values() for s in samples if label in s.labels}


@dataclass(slots=True)
class _RankSplit:
    """A metrics source that reads one scrape as the engine's signals and, on the side, each rank's.

    It hands ``telemetry.scrape`` the adapter's own names and hint, so a failure reads the same; one
    instance serves one scrape."""

    adapter: EngineAdapter
    ranks: tuple[int, ...]
    by_rank: dict[int, EngineSignals] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.adapter.name

    @property
    def metrics_path(self) -> str:
        return self.adapter.metrics_path

    @property
    def metrics_hint(self) -> str:
        return self.adapter.metrics_hint

    @property
    def wanted_metrics(self) -> frozenset[str]:
        return self.adapter.wanted_metrics

    def signals(self, families: MetricFamilies) -> EngineSignals:
        whole = self.adapter.signals(families)
        label = self.adapter.dp_rank_label
        split = split_by_rank(families, self.ranks, label)
        if split is not None:
            self.by_rank = {rank: self.adapter.signals(f) for rank, f in split.items()}
            if self.adapter.rank_capacity_is_engine_total and whole.cache_capacity_tokens is not None:
                share = whole.cache_capacity_tokens // len(_rank_values(families, label))
                self.by_rank = {r: replace(s, cache_capacity_tokens=share) for r, s in self.by_rank.items()}
        return whole


async def scrape_targets(
    client: Client, targets: Sequence[Target]
) -> dict[str, EngineSignals | MetricsError]:
    """Backend id -> its signals (a rank's own when the engine labels ranks) or the scrape's error.

    Each engine URL is fetched once, whatever number of ranks (targets) it serves."""
    by_url: dict[str, list[Target]] = {}
    for t in targets:
        by_url.setdefault(t.url, []).append(t)
    sources: dict[str, MetricsSource] = {}
    for url, ts in by_url.items():
        ranks = tuple(sorted({t.dp_rank for t in ts if t.dp_rank is not None}))
        sources[url] = _RankSplit(ts[0].adapter, ranks) if ranks else ts[0].adapter
    results = await scrape_many(client, sources)
    out: dict[str, EngineSignals | MetricsError] = {}
    for url, result in results.items():
        per_rank: Mapping[int, EngineSignals] = {}
        source = sources[url]
        if isinstance(source, _RankSplit):
            per_rank = source.by_rank
        for t in by_url[url]:
            own = per_rank.get(t.dp_rank) if t.dp_rank is not None else None
            out[t.backend_id] = own if own is not None and not isinstance(result, MetricsError) else result
    return out


def rank_pin(backend: Backend, default_engine: str) -> RankPin:
    """What pins a request to ``backend``'s data-parallel rank (its adapter's header and body fields);
    nothing for a backend that is a whole engine."""
    if backend.dp_rank is None:
        return _NO_PIN
    return get_adapter(backend.engine or default_engine).pin_rank(backend.dp_rank)


_NO_PIN = RankPin()
