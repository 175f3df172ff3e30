"""The records every consumer (router, autoscaler, bench, doctor) reads engine state from."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class EngineSignals:
    """Engine state parsed from one /metrics scrape, engine-neutral.

    Engine adapters (``infctl.engines``) fill it from their own metric names; nothing outside that package
    needs to know which engine produced it.
    """

    queue: float = 0.0
    """Requests waiting to be scheduled (vLLM num_requests_waiting, SGLang num_queue_reqs)."""
    running: float = 0.0
    """Requests in the running batch."""
    kv_usage: float = 0.0
    """Fraction of KV-cache capacity in use, 0..1."""
    prefix_queries: float = 0.0
    """Cumulative prompt tokens looked up in the prefix cache (counter; diff two scrapes for a rate)."""
    prefix_hits: float = 0.0
    """Cumulative prompt tokens found in the prefix cache (counter)."""
    prompt_tokens: float = 0.0
    """Cumulative prompt tokens processed (counter)."""
    generation_tokens: float = 0.0
    """Cumulative generated tokens (counter)."""
    preemptions: float = 0.0
    """Cumulative preemptions (counter): vLLM's preemptions, SGLang's retractions."""
    cache_capacity_tokens: int | None = None
    """KV-cache capacity in tokens (vLLM num_gpu_blocks x block_size, SGLang max_total_num_tokens)."""
    block_size: int | None = None
    """KV block size in tokens, when the engine reports it."""
    prefix_caching: bool | None = None
    """Whether prefix caching is enabled, when the engine reports it."""
    model_names: tuple[str, ...] = ()
    """Values of the model_name label seen in the scrape."""
    deprecated: tuple[str, ...] = field(default=())
    """Deprecated metric names the signals had to be read from (doctor warns about these)."""

    @property
    def hit_rate(self) -> float | None:
        """Lifetime prefix-cache hit rate, or None before any lookup."""
        return self.prefix_hits / self.prefix_queries if self.prefix_queries else None


@dataclass(frozen=True, slots=True)
class RankLoad:
    """One data-parallel rank's load, as an engine's load endpoint reports it."""

    dp_rank: int
    running: float
    waiting: float
    kv_usage: float | None = None
    """Fraction of the rank's KV capacity in use, 0..1, when reported."""


@dataclass(frozen=True, slots=True)
class LoadReport:
    """An engine's load endpoint (vLLM ``/load``, SGLang ``/v1/loads``), engine-neutral.

    Cheaper and fresher than /metrics, but engines report different things: vLLM only counts requests
    in flight at its API server; SGLang reports running and waiting per data-parallel rank.
    """

    in_flight: float
    """Requests accepted and not finished (running + waiting)."""
    running: float | None = None
    """Requests in the running batch, when reported."""
    waiting: float | None = None
    """Requests waiting to be scheduled, when reported."""
    kv_usage: float | None = None
    """Mean KV usage over ranks, 0..1, when reported."""
    ranks: tuple[RankLoad, ...] = ()
    """Per data-parallel rank, when reported (pin a request to the least loaded one)."""
