"""The engine state a personality reads: its instance (``EngineView``), the capacity it reports and the
request-level observations behind its histograms."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from infctl.sim.faults import FaultState
from infctl.sim.personality.pd import BootstrapRegistry
from infctl.sim.settings import SimSettings
from infctl.sim.types import CoreStats
from infctl.telemetry.exposition import Histogram
from infctl.tokenization import Tokenizer


@dataclass(frozen=True, slots=True)
class Capacity:
    """The profile values the HTTP surface reports."""

    block_size: int
    num_gpu_blocks: int
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    enable_prefix_caching: bool


class EngineMetrics:
    """Request-level observations (simulated seconds / tokens); counters and gauges come from CoreStats."""

    def __init__(self, buckets: Mapping[str, Sequence[float]]) -> None:
        self.hist: dict[str, Histogram] = {k: Histogram(b) for k, b in buckets.items()}
        self.finished: dict[str, int] = {"stop": 0, "length": 0, "abort": 0}
        self._gen_samples: deque[tuple[float, int]] = deque(maxlen=64)

    def observe(self, key: str, value: float, n: int = 1) -> None:
        h = self.hist.get(key)
        if h is not None:
            h.observe(value, n)

    def finish(self, reason: str) -> None:
        self.finished[reason] = self.finished.get(reason, 0) + 1

    def sample_generation(self, now: float, generation_tokens: int) -> None:
        """Record (time, cumulative generated tokens) at most every 0.5 simulated seconds."""
        if not self._gen_samples or now - self._gen_samples[-1][0] >= 0.5:
            self._gen_samples.append((now, generation_tokens))

    def gen_throughput(self, now: float, generation_tokens: int, window: float = 5.0) -> float:
        """Generated tokens per simulated second over about the last ``window`` seconds."""
        base: tuple[float, int] | None = None
        for t, g in reversed(self._gen_samples):
            base = (t, g)
            if now - t >= window:
                break
        if base is None or now - base[0] <= 0:
            return 0.0
        return (generation_tokens - base[1]) / (now - base[0])


class EngineView(Protocol):
    """What a personality reads from its instance."""

    @property
    def model(self) -> str: ...
    @property
    def index(self) -> int: ...
    @property
    def host(self) -> str: ...
    @property
    def port(self) -> int: ...
    @property
    def engine_id(self) -> str: ...
    @property
    def role(self) -> str: ...
    @property
    def settings(self) -> SimSettings: ...
    @property
    def capacity(self) -> Capacity: ...
    @property
    def tokenizer(self) -> Tokenizer:
        """What prompts are tokenized with (``SimSettings.tokenizer``)."""

    @property
    def metrics(self) -> EngineMetrics: ...
    @property
    def faults(self) -> FaultState: ...
    @property
    def registry(self) -> BootstrapRegistry: ...
    @property
    def server_load(self) -> int:
        """Generation requests in flight on this instance (vLLM ``/load``)."""

    @property
    def pd_waiting(self) -> int:
        """Decode requests waiting for their KV (SGLang transfer queue)."""

    def stats(self) -> CoreStats: ...
    def now(self) -> float: ...
    def gen_throughput(self) -> float: ...
    def reset_cache(self) -> bool: ...
    async def probe(self) -> bool:
        """Generate one token end to end (SGLang ``/health_generate``)."""
