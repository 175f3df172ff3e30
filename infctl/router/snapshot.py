"""The frozen records every routing decision is a function of.

A live router builds a :class:`Snapshot` from its backend list, the last scrape of each engine and its own
in-flight counters; the cluster simulator builds one from its virtual engines; tests build them by hand.
Policies never see anything else, which is why the three run the same code.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from infctl.lazy_chain import LazyChain
from infctl.router.hashing import stable_hash
from infctl.router.kv_chain import HASH_SEED
from infctl.telemetry.signals import EngineSignals
from infctl.tokens import token_ids

Role = Literal["prefill", "decode", "both"]


@dataclass(frozen=True, slots=True)
class Backend:
    """One routing target. A data-parallel engine contributes one Backend per rank, each with its own load."""

    id: str
    """Unique and stable (it keys the prefix indexes): e.g. ``http://10.0.0.7:8000`` or ``...:8000#dp3``."""
    url: str = ""
    role: Role = "both"
    """``both`` serves whole requests; ``prefill``/``decode`` are the halves of a PD pair."""
    group: str | None = None
    """PD group (prefill and decode engines that share a fast interconnect); pairs stay inside one group."""
    pool: str | None = None
    """Pool name that length buckets map to (pools may live in different clusters)."""
    upstream: str = "default"
    """Upstream group that weighted splitting (cutover old/new, mirroring) chooses between."""
    engine: str = ""
    """Engine kind as the adapters name it; opaque here."""
    dp_rank: int | None = None
    """Data-parallel rank this target addresses (sent as the engine's DP-rank header by the proxy)."""
    dp_size: int | None = None
    """How many data-parallel ranks the engine of ``dp_rank`` serves (discovery's ``data-parallel-size``, a
    router file's ``dp_size``); None: unknown. An SGLang PD prefill's bootstrap room is drawn for it
    (``infctl.engines.new_bootstrap_room``)."""
    weight: float = 1.0
    """Relative capacity: load is divided by it and weighted pickers favour it."""
    healthy: bool = True
    ejected: bool = False
    """Passively ejected after errors; re-admitted by the health checker."""
    draining: bool = False
    """Finishing its in-flight requests; receives no new ones."""
    models: tuple[str, ...] = ()
    """Model names served; empty means any."""
    bootstrap_port: int | None = None
    """A parallel-style PD prefill (SGLang): the port its bootstrap server listens on; None: the engine's
    default."""
    decode_can_prefill: bool = True
    """For role ``decode``: whether the engine also serves a request sent without its prefill leg (a short
    prompt skips disaggregation). The router's pool sets it false for engines whose adapter says a decode
    engine never serves alone (``EngineAdapter.decode_serves_alone``: SGLang)."""
    key: int = field(init=False, repr=False, compare=False)
    """Stable hash of ``id`` used for deterministic tie-breaks."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", stable_hash(self.id))

    @property
    def routable(self) -> bool:
        return self.healthy and not self.ejected and not self.draining


@dataclass(frozen=True, slots=True)
class BackendState:
    """What the router knows about a backend's load right now."""

    signals: EngineSignals | None = None
    """Last engine scrape, or None before the first one (counts as stale)."""
    signals_age_s: float = math.inf
    """Seconds since that scrape."""
    inflight: int = 0
    """Requests this router sent that have not finished (always fresh: the router counts them itself)."""
    queued_tokens: float = 0.0
    """Prompt tokens this router sent whose first token has not come back yet (estimated prefill queue)."""
    inflight_tokens: float = 0.0
    """Context tokens (prompt + expected output) of this router's in-flight requests: the decode load."""

    def is_stale(self, stale_after_s: float) -> bool:
        return self.signals is None or self.signals_age_s > stale_after_s


_NO_STATE = BackendState()


@dataclass(frozen=True, slots=True)
class RequestInfo:
    """A request as policies see it. Block hashes are computed once, when the request arrives."""

    request_id: str
    model: str = ""
    prompt_tokens: int = 0
    """Prompt length in tokens (exact from ids, or estimated)."""
    block_hashes: Sequence[int] = ()
    """Chained hashes of the prompt's full blocks (``infctl.tokens.block_hashes``); from ``from_ids`` a
    ``LazyChain``, hashed as read, so matching a prompt that shares nothing hashes one run of blocks."""
    block_size: int = 16
    """Tokens per block the hashes were computed with."""
    session_key: str | None = None
    """Value of the session-affinity header, when present."""
    headers: Mapping[str, str] = field(default_factory=dict, hash=False, compare=False)
    """Request headers policies may consult (lower-case names)."""
    is_stream: bool = False
    max_tokens: int | None = None
    estimated: bool = False
    """Count and hashes are the estimate's, not the model's ids (``infctl.tokenization.band``): the precise
    index, keyed on the engines' real ids, never takes them."""
    prompt_chars: int = 0
    """Characters of prompt text (``infctl.router.requests.prompt_chars``), read before any tokenizing; what
    the exact count after routing is set against (``infctl.router.estimating``). 0: not read."""
    _key: int | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def key(self) -> int:
        """Stable hash of ``request_id``: seeds tie-breaks and sampling so replicas agree. Computed on first
        use: most decisions have no tie to break."""
        key = self._key
        if key is None:
            key = stable_hash(self.request_id)
            object.__setattr__(self, "_key", key)
        return key

    @property
    def num_blocks(self) -> int:
        return len(self.block_hashes)

    @classmethod
    def from_ids(
        cls,
        request_id: str,
        ids: Sequence[int],
        *,
        block_size: int = 16,
        model: str = "",
        seed: str | None = None,
        session_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        is_stream: bool = False,
        max_tokens: int | None = None,
        prompt_tokens: int | None = None,
        prompt_chars: int = 0,
    ) -> RequestInfo:
        """Build from prompt token ids; the hash seed defaults to ``HASH_SEED`` (as the precise index's).
        ``prompt_tokens``: the count when it is not ``len(ids)`` (a batch: every prompt's, only their common
        prefix hashed)."""
        return cls(
            request_id=request_id,
            model=model,
            prompt_tokens=len(ids) if prompt_tokens is None else prompt_tokens,
            block_hashes=LazyChain(ids, block_size, HASH_SEED if seed is None else seed),
            block_size=block_size,
            session_key=session_key,
            headers=dict(headers or {}),
            is_stream=is_stream,
            max_tokens=max_tokens,
            prompt_chars=prompt_chars,
        )

    @classmethod
    def from_text(
        cls,
        request_id: str,
        text: str,
        *,
        block_size: int = 16,
        model: str = "",
        session_key: str | None = None,
    ) -> RequestInfo:
        """Build from prompt text under the token convention of ``infctl.tokens``."""
        return cls.from_ids(
            request_id, token_ids(text), block_size=block_size, model=model, session_key=session_key
        )


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The backends, their state, and the time the snapshot was taken (seconds, the caller's clock)."""

    backends: tuple[Backend, ...]
    states: Mapping[str, BackendState] = field(default_factory=dict)
    now: float = 0.0
    by_id: Mapping[str, Backend] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_id", {b.id: b for b in self.backends})

    def state(self, backend_id: str) -> BackendState:
        """The backend's state; a backend with none recorded is stale and idle."""
        return self.states.get(backend_id, _NO_STATE)
