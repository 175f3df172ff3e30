"""Records exchanged between the simulated engine's core (pure, clock-free) and its drivers.

Drivers are the HTTP server (``infctl sim``, real time scaled by ``--time-scale``) and the cluster
simulator (virtual clock). Both call ``EngineCore.step(now)`` and wait ``StepOutput.duration`` before
delivering its outputs: the step's work is done at ``now + duration``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from infctl.telemetry.kv_events import BlockRemoved, BlockStored, KVEvent

__all__ = [
    "BlockRemoved",
    "BlockStored",
    "CoreStats",
    "KVEvent",
    "SimRequest",
    "StepOutput",
    "TierStats",
    "TokenEvent",
]


@dataclass(slots=True)
class SimRequest:
    """One request as the engine core sees it."""

    request_id: str
    prompt_ids: list[int]
    """Prompt token ids (see ``infctl.tokens``)."""
    max_tokens: int
    """Tokens to generate; generation stops after this many (no EOS in the simulator)."""
    arrival: float
    """Time the request reached the engine, in the driver's clock (seconds)."""
    remote_prefill: bool = False
    """Decode role: the prompt's KV comes from a prefill engine; charge transfer time instead of prefill."""
    seed: int = 0
    """Selects the generated words (``infctl.tokens.output_word``)."""
    kv_transfer_gbps: float | None = None
    """Remote prefill: bandwidth of the link the prompt's KV comes over (GB/s); None: the profile's
    ``kv_transfer_gbps``. Set per request because a decode engine can pull from prefill engines over
    different links (inside its switch group, or across the spine)."""


@dataclass(frozen=True, slots=True)
class TokenEvent:
    """Tokens a request produced in one step."""

    request_id: str
    new_tokens: int
    """Tokens generated in this step (0 for a prefill chunk that did not finish the prompt)."""
    finished: bool
    finish_reason: str | None = None
    """"length" when max_tokens was reached, "abort" when aborted, "error" when it cannot fit."""
    cached_tokens: int = 0
    """On the first token: prompt tokens served from the prefix cache (or transferred, for remote prefill)."""


@dataclass(frozen=True, slots=True)
class StepOutput:
    """What one scheduler step did."""

    duration: float
    """Simulated seconds the step takes (beta0 + beta1*prefill + beta2*decode + attention term)."""
    events: list[TokenEvent] = field(default_factory=list)
    prefill_tokens: int = 0
    decode_seqs: int = 0
    preempted: list[str] = field(default_factory=list)
    """Requests preempted (KV freed, sent back to waiting) in this step."""
    kv_events: list[KVEvent] = field(default_factory=list)
    """Cache changes in this step, in order; published only when KV events are enabled."""


@dataclass(frozen=True, slots=True)
class TierStats:
    """The offload tier's gauges and cumulative counters (see ``infctl.sim.offload``)."""

    capacity_blocks: int
    used_blocks: int
    query_tokens: int
    """Prompt tokens looked up in the tier: each request's prompt minus its HBM hit, at first admission."""
    hit_tokens: int
    """Prompt tokens loaded from the tier instead of computed."""
    load_bytes: int
    store_bytes: int
    load_seconds: float
    """Time the tier-to-HBM link spent copying (sum over loads)."""
    store_seconds: float


@dataclass(frozen=True, slots=True)
class CoreStats:
    """Gauges and counters the personalities turn into /metrics (counters are cumulative)."""

    running: int
    waiting: int
    kv_usage: float
    """Used blocks / total blocks, 0..1 (cached-but-free blocks do not count as used)."""
    num_gpu_blocks: int
    block_size: int
    used_blocks: int
    prefix_queries: int
    """Prompt tokens looked up in the prefix cache (tokens)."""
    prefix_hits: int
    prompt_tokens: int
    generation_tokens: int
    preemptions: int
    prompt_local_hits: int = 0
    """Of ``prompt_tokens``, those HBM's prefix cache supplied (counted with them, at the first token)."""
    prompt_external: int = 0
    """Of ``prompt_tokens``, those whose KV came from the offload tier or a prefill engine; the rest were
    computed (vLLM's ``prompt_tokens_by_source``)."""
    tier: TierStats | None = None
    """The offload tier's figures; None when the engine has none."""
