"""Where a scheduled request's KV lives: the HBM block pool with its prefix cache, and the offload tier.

The scheduler (:mod:`infctl.sim.scheduler`) decides which requests run and how many tokens each computes;
:class:`KVManager` answers what admitting one would hit and cost in blocks, hands out and registers the
blocks, and moves blocks between HBM and the tier (as vLLM's ``KVCacheManager`` and offloading connector).
Pure, like the scheduler: callers pass the clock.
"""

from __future__ import annotations

from infctl.sim.kvcache import BlockPool, SequenceHashes
from infctl.sim.offload import HostTier, OffloadTier
from infctl.sim.profiles import SimProfile
from infctl.sim.types import KVEvent, SimRequest


class RequestState:
    """A request's scheduling state. Known tokens = prompt + ``n_out`` generated; ``n_computed`` have KV."""

    __slots__ = (
        "blocks",
        "cached_tokens",
        "decoding",
        "done",
        "external",
        "hashes",
        "link_bps",
        "local_hit",
        "max_tokens",
        "n_cached",
        "n_computed",
        "n_out",
        "prompt",
        "prompt_len",
        "ready_at",
        "remote",
        "rid",
        "seed",
    )

    def __init__(self, req: SimRequest, remote: bool) -> None:
        self.rid = req.request_id
        self.prompt = req.prompt_ids
        self.prompt_len = len(req.prompt_ids)
        self.max_tokens = req.max_tokens
        self.seed = req.seed
        self.remote = remote
        self.link_bps = req.kv_transfer_gbps * 1e9 if req.kv_transfer_gbps else None
        """Waiting for its prompt's KV from a prefill engine (cleared when it arrives); a load from the
        offload tier also waits with the transfers, with ``remote`` False."""
        self.n_out = 0
        self.n_computed = 0
        self.blocks: list[int] = []
        self.hashes: SequenceHashes | None = None
        """Chained block hashes, made at first admission and extended as tokens are generated."""
        self.n_cached = 0
        """Leading blocks already registered in the prefix cache (or found there)."""
        self.cached_tokens = -1
        """Prefix hit at first admission; -1 until then."""
        self.local_hit = 0
        """Of ``cached_tokens``, those found in HBM's prefix cache."""
        self.external = 0
        """Prompt tokens whose KV came from outside HBM: the offload tier's, a prefill engine's."""
        self.decoding = False
        self.done = False
        self.ready_at = 0.0


Plan = tuple[list[int], int, int]
"""An admission's HBM-hit blocks, tokens to cover with blocks, and tier-hit blocks after the HBM hit."""


class KVManager:
    """One engine's KV: ``pool`` (HBM blocks, prefix cache) and ``tier`` (the offload tier, if any)."""

    def __init__(
        self,
        profile: SimProfile,
        *,
        kv_events: bool = False,
        hash_seed: str | None = None,
        offload: OffloadTier | None = None,
    ) -> None:
        self.block_size = bs = profile.block_size
        self.caching = profile.enable_prefix_caching
        self._seed = profile.model if hash_seed is None else hash_seed
        self.pool = BlockPool(profile.num_gpu_blocks, record_events=kv_events)
        self.tier: HostTier | None = None
        self.to_store: list[int] | None = None
        """Write-through: hashes of this step's full blocks, copied to the tier when the step ends."""
        if offload is not None:
            self.tier = HostTier(
                offload, block_size=bs, kv_bytes_per_token=profile.kv_bytes_per_token, record_events=kv_events
            )
            if self.tier.write_through:
                self.to_store = []
            else:
                self.pool.evicted = []

    def plan(self, r: RequestState, budget: int, now: float) -> Plan | None:
        """What admitting ``r`` with ``budget`` tokens would hit and cover (tier copies judged ready at
        ``now``); None if the pool has no room. Never the whole sequence: its last token is recomputed."""
        bs = self.block_size
        pool = self.pool
        n_tokens = r.prompt_len + r.n_out
        hits: list[int] = []
        n_tier = 0
        limit = (n_tokens - 1) // bs
        if self.caching and limit:
            hashes = self.hashes(r, limit)
            hits = pool.lookup(hashes, limit)
            if self.tier is not None and len(hits) < limit and not r.remote:
                n_tier = self.tier.lookup(hashes, len(hits), limit, now)
        hit_tokens = (len(hits) + n_tier) * bs
        covered = n_tokens if r.remote else hit_tokens + min(n_tokens - hit_tokens, budget)
        need = (covered + bs - 1) // bs - len(hits)
        if need > pool.num_free - pool.count_unreferenced(hits):
            return None
        return hits, covered, n_tier

    def take(self, r: RequestState, hits: list[int], covered: int) -> int:
        """Give ``r`` its hit blocks and fresh ones covering ``covered`` tokens; returns the HBM hit in
        tokens."""
        pool = self.pool
        pool.touch(hits)
        r.blocks = hits + pool.allocate((covered + self.block_size - 1) // self.block_size - len(hits))
        hit_tokens = len(hits) * self.block_size
        r.n_computed = hit_tokens
        r.n_cached = len(hits)
        if self.to_store is not None and hits and r.hashes is not None:
            # Write-through refreshes (or re-stores) the prefix a request reuses, as vLLM's connector does.
            self.to_store += r.hashes.hashes[: len(hits)]
        return hit_tokens

    def free(self, r: RequestState) -> None:
        """Drop ``r``'s blocks (its full blocks stay cached)."""
        self.pool.free(r.blocks)
        r.blocks = []

    def load(self, r: RequestState, first: int, n_blocks: int, now: float) -> None:
        """Copy blocks ``first..first+n_blocks`` of ``r`` from the tier from ``now``; ``r.ready_at`` is when
        the copy is done."""
        assert self.tier is not None and r.hashes is not None
        r.ready_at = self.tier.load(r.hashes.hashes[first : first + n_blocks], now)
        r.n_computed = (first + n_blocks) * self.block_size

    def reset_prefix_cache(self) -> bool:
        """Forget all cached prefixes, the tier's too; refused (False) while any request holds blocks."""
        if not self.pool.reset_cache():
            return False
        if self.tier is not None:
            self.tier.clear()
        return True

    def end_step(self, start: float, end: float) -> list[KVEvent]:
        """The step's cache changes, after copying its blocks to the tier: evicted ones from the step's
        ``start`` (write-back, before the block is overwritten), computed ones from its ``end``
        (write-through)."""
        pool, tier = self.pool, self.tier
        events = pool.drain_events() if pool.record_events else []
        if tier is None:
            return events
        evicted = pool.evicted
        if evicted:
            tier.store(evicted, start)
            evicted.clear()
        if self.to_store:
            tier.store(self.to_store, end)
            self.to_store = []
        if tier.events:
            events += tier.drain_events()
        return events

    # -- prefix-cache hashes ----------------------------------------------------------------------

    def hashes(self, r: RequestState, n_blocks: int) -> list[int]:
        if r.hashes is None:
            r.hashes = SequenceHashes(r.prompt, r.seed, self.block_size, self._seed)
        return r.hashes.upto(n_blocks)

    def cache_full_blocks(self, r: RequestState, n_tokens: int) -> None:
        """Register the full blocks of ``r``'s first ``n_tokens`` not yet cached; one BlockStored per run of
        newly cached blocks."""
        pool = self.pool
        full = n_tokens // self.block_size
        hashes = self.hashes(r, full)
        if self.to_store is not None:
            self.to_store += hashes[r.n_cached : full]
        runs: list[list[int]] = []
        for i in range(r.n_cached, full):
            if pool.cache(r.blocks[i], hashes[i]):
                if runs and runs[-1][-1] == i - 1:
                    runs[-1].append(i)
                else:
                    runs.append([i])
        r.n_cached = full
        if pool.record_events and r.hashes is not None:
            for run in runs:
                ids = [t for i in run for t in r.hashes.block_ids(i)]
                parent = hashes[run[0] - 1] if run[0] else None
                pool.record_stored([hashes[i] for i in run], parent, ids, self.block_size)
