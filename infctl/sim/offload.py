"""A second KV tier (host DRAM, or a pool shared over the network) behind the HBM block pool.

How the real engines behave, and what this model keeps of it:

* **Stores.** vLLM's native offloading (``--kv-offloading-size GiB``, the OffloadingConnector) and SGLang
  HiCache's default ``--hicache-write-policy write_through`` copy every block that becomes full in HBM to
  the host, asynchronously, on their own copy stream: ``write_policy="write_through"``. SGLang's
  ``write_back`` copies a block only when HBM evicts it: ``write_policy="write_back"``. A copy is usable once
  it finished (``store`` bandwidth, one copy after another on the link); until then a lookup misses it.
* **Capacity.** The tier is an LRU of block hashes with its own capacity (vLLM's CPU manager is LRU too).
  A store into a full tier evicts its least recently used blocks; storing a hash the tier holds refreshes
  it, so a prefix kept hot in HBM stays in the tier (vLLM re-stores it the next time a request uses it).
* **Loads.** A prefix lookup that misses HBM continues in the tier; the consecutive blocks found there are
  copied back (``latency + bytes / load bandwidth``, loads queued one after another on the link) while the
  request waits, as vLLM parks it in WAITING_FOR_REMOTE_KVS until the connector's load finished. The copy
  overlaps compute: the batch keeps running and no step is slowed (real DMA does contend for HBM bandwidth;
  this model leaves that out). Loaded tokens count as cached for TTFT; stats report them apart from HBM hits.
* **Events.** Stores and evictions are ``BlockStored``/``BlockRemoved`` with medium "CPU", as vLLM's
  connector publishes them (hashes only: no token ids, no parent).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from infctl.errors import ConfigError
from infctl.sim.types import TierStats
from infctl.telemetry.kv_events import MEDIUM_CPU, BlockRemoved, BlockStored, KVEvent

WritePolicy = Literal["write_through", "write_back"]

GIB = 1024**3


@dataclass(frozen=True)
class OffloadTier:
    """Size and speed of the second KV tier (the simulated engine's ``offload`` argument)."""

    capacity_gib: float = 0.0
    """Memory for KV blocks, GiB (2**30 bytes), as vLLM's ``--kv-offloading-size``; turned into blocks with
    the profile's ``kv_bytes_per_token * block_size``. Ignored when ``capacity_blocks`` is set."""
    capacity_blocks: int | None = None
    """Capacity in blocks of the engine's block size; None: from ``capacity_gib``."""
    load_gbps: float = 50.0
    """Tier-to-HBM bandwidth, GB/s (1e9 bytes/s). Default: PCIe 5.0 x16 bulk copies measure 52-60 GB/s
    of the 64 GB/s peak per direction; rounded down for per-block DMA overhead."""
    store_gbps: float = 50.0
    """HBM-to-tier bandwidth, GB/s."""
    latency_s: float = 0.0
    """Fixed cost of each load or store batch, seconds (0 for local DRAM; ~1e-3 for a remote pool)."""
    write_policy: WritePolicy = "write_through"
    """``write_through``: every full block is copied when computed (vLLM, SGLang's default);
    ``write_back``: only blocks HBM evicts (SGLang ``--hicache-write-policy write_back``)."""

    def __post_init__(self) -> None:
        if self.capacity_gib < 0 or (self.capacity_blocks is not None and self.capacity_blocks < 0):
            raise ConfigError("offload tier capacity must be >= 0")
        if self.load_gbps <= 0 or self.store_gbps <= 0 or self.latency_s < 0:
            raise ConfigError(
                f"offload tier: bandwidths must be > 0 GB/s and latency >= 0 s, got load "
                f"{self.load_gbps}, store {self.store_gbps}, latency {self.latency_s}"
            )
        if self.write_policy not in ("write_through", "write_back"):
            raise ConfigError(
                f"offload tier write policy {self.write_policy!r} is not write_through or write_back"
            )

    def num_blocks(self, bytes_per_block: int) -> int:
        """Blocks the tier holds, given the bytes one block's KV takes."""
        if self.capacity_blocks is not None:
            return self.capacity_blocks
        return int(self.capacity_gib * GIB // bytes_per_block)


class HostTier:
    """The tier's state: an LRU of block hashes, each with the time its copy becomes usable.

    Pure: callers pass ``now``. Counters are cumulative (``stats``).
    """

    __slots__ = (
        "_load_free_at",
        "_lru",
        "_store_free_at",
        "block_size",
        "bytes_per_block",
        "capacity",
        "config",
        "events",
        "hit_tokens",
        "load_bytes",
        "load_seconds",
        "query_tokens",
        "record_events",
        "store_bytes",
        "store_seconds",
        "write_through",
    )

    def __init__(
        self, config: OffloadTier, *, block_size: int, kv_bytes_per_token: int, record_events: bool = False
    ) -> None:
        self.config = config
        self.block_size = block_size
        self.bytes_per_block = kv_bytes_per_token * block_size
        if self.bytes_per_block <= 0:
            raise ConfigError("an offload tier needs a profile with kv_bytes_per_token > 0")
        self.capacity = config.num_blocks(self.bytes_per_block)
        self.write_through = config.write_policy == "write_through"
        self._lru: OrderedDict[int, float] = OrderedDict()
        self._load_free_at = self._store_free_at = 0.0
        self.record_events = record_events
        self.events: list[KVEvent] = []
        self.query_tokens = self.hit_tokens = 0
        self.load_bytes = self.store_bytes = 0
        self.load_seconds = self.store_seconds = 0.0

    def __len__(self) -> int:
        return len(self._lru)

    def __contains__(self, block_hash: int) -> bool:
        return block_hash in self._lru

    def hashes(self) -> list[int]:
        """Held hashes, least recently used first (for tests and inspection)."""
        return list(self._lru)

    def lookup(self, hashes: Sequence[int], start: int, limit: int, now: float) -> int:
        """How many of ``hashes[start:limit]``, from ``start`` on, the tier holds ready at ``now``."""
        get = self._lru.get
        n = 0
        for i in range(start, min(limit, len(hashes))):
            ready = get(hashes[i])
            if ready is None or ready > now:
                break
            n += 1
        return n

    def load(self, hashes: Sequence[int], now: float) -> float:
        """Copy ``hashes`` (held, ready) back to HBM from ``now``; returns when the copy is done."""
        lru = self._lru
        for h in hashes:
            lru.move_to_end(h)
        nbytes = len(hashes) * self.bytes_per_block
        seconds = self.config.latency_s + nbytes / (self.config.load_gbps * 1e9)
        done = max(now, self._load_free_at) + seconds
        self._load_free_at = done
        self.load_bytes += nbytes
        self.load_seconds += seconds
        return done

    def store(self, hashes: Sequence[int], now: float) -> None:
        """Copy the blocks of ``hashes`` the tier lacks from ``now`` on (held ones are refreshed), then evict
        least recently used blocks beyond capacity."""
        if not self.capacity:
            return
        lru = self._lru
        new = [h for h in hashes if h not in lru]
        for h in hashes:
            if h in lru:
                lru.move_to_end(h)
        if new:
            nbytes = len(new) * self.bytes_per_block
            seconds = self.config.latency_s + nbytes / (self.config.store_gbps * 1e9)
            done = max(now, self._store_free_at) + seconds
            self._store_free_at = done
            self.store_bytes += nbytes
            self.store_seconds += seconds
            for h in new:
                lru[h] = done
            if self.record_events:
                self.events.append(BlockStored(new, None, [], self.block_size, medium=MEDIUM_CPU))
        removed: list[int] = []
        while len(lru) > self.capacity:
            removed.append(lru.popitem(last=False)[0])
        if removed and self.record_events:
            self.events.append(BlockRemoved(removed, medium=MEDIUM_CPU))

    def clear(self) -> None:
        """Forget every block (a prefix-cache reset; the caller publishes AllBlocksCleared)."""
        self._lru.clear()

    def drain_events(self) -> list[KVEvent]:
        events, self.events = self.events, []
        return events

    def stats(self) -> TierStats:
        return TierStats(
            capacity_blocks=self.capacity,
            used_blocks=len(self._lru),
            query_tokens=self.query_tokens,
            hit_tokens=self.hit_tokens,
            load_bytes=self.load_bytes,
            store_bytes=self.store_bytes,
            load_seconds=self.load_seconds,
            store_seconds=self.store_seconds,
        )
