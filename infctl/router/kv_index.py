"""The precise prefix index: what each backend really caches, built from its engine's KV events.

Engines publish numbered batches of events (vLLM: BlockStored, BlockRemoved, AllBlocksCleared; decoded from
the wire by the subscriber, see ``infctl.telemetry.kv_events``). Batches are applied in sequence order; a gap
(dropped batches) is reported so the caller can resync, for instance by clearing that backend and replaying.
Router replicas fed the same batches hold the same index, so they make the same choice for the same request.

Events lag the routing decision by a prefill (the engine publishes BlockStored once it has computed the
blocks), so a burst of requests sharing a new prefix would see nobody holding it and scatter. ``speculate``
closes that window: on routing, the request's blocks are entered for the chosen backend with a deadline
(seconds on the caller's clock). A BlockStored confirms an entry; a deadline passing without one drops it
(the engine evicted the blocks, or never cached them). Replicas that route the same requests at the same
snapshot times still hold the same index.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from infctl.router._owners import OwnerMap
from infctl.router.kv_chain import BlockChains
from infctl.telemetry.kv_events import MEDIUM_GPU


@dataclass(frozen=True, slots=True)
class ApplyResult:
    applied: bool
    """False when the batch was a duplicate or older than one already applied (ignored)."""
    missed: int = 0
    """Batches skipped between the previous one and this one; non-zero means the index may be wrong."""


class KVIndex:
    """Per-backend sets of cached block hashes, maintained from KV events."""

    __slots__ = ("_blocks", "_chains", "_owners", "_seq", "_sources", "_spec", "block_size")

    def __init__(self, block_size: int = 16) -> None:
        self.block_size = block_size
        """Tokens per router block: events carrying token ids are re-hashed into blocks of this size."""
        self._chains: dict[str, BlockChains] = {}
        """Per backend whose events carry token ids: engine hash -> the router blocks it stands for."""
        self._owners = OwnerMap()
        self._blocks: dict[str, set[int]] = {}
        """Confirmed by BlockStored events."""
        self._spec: dict[str, OrderedDict[int, float]] = {}
        """Speculative entries: hash -> deadline, oldest deadline first (not confirmed yet)."""
        self._seq: dict[str, int] = {}
        self._sources: set[str] = set()
        """Backends whose engine has sent at least one event (their entries are not guesses alone)."""

    def apply(self, backend: str, seq: int, events: Iterable[object]) -> ApplyResult:
        """Apply the events of batch ``seq`` from ``backend``'s publisher, in sequence order."""
        last = self._seq.get(backend)
        if last is not None and seq <= last:
            return ApplyResult(applied=False)
        missed = 0 if last is None else seq - last - 1
        self._seq[backend] = seq
        for event in events:
            self.apply_event(backend, event)
        return ApplyResult(applied=True, missed=missed)

    def apply_event(self, backend: str, event: object) -> None:
        """Apply one event outside sequence tracking (a simulator may call this directly).

        Events are told apart by their vLLM tag, which is their class name; unknown kinds raise ValueError.
        """
        kind = type(event).__name__
        self._sources.add(backend)
        if kind == "AllBlocksCleared":
            self.clear(backend)
            return
        if getattr(event, "medium", MEDIUM_GPU) != MEDIUM_GPU:
            # An offload tier's copies (medium "CPU"): the index is of what the GPU holds, and a tier
            # eviction must not drop a block the GPU still has.
            return
        hashes: Iterable[int] = getattr(event, "block_hashes", ())
        spec = self._spec.get(backend)
        # Events with token ids (every real engine's) are re-hashed into the router's own blocks; events
        # without (infctl's in-process replays) are in the router's hashing already.
        token_ids = getattr(event, "token_ids", None)
        if kind == "BlockStored" and token_ids:
            chains = self._chains.get(backend)
            if chains is None:
                chains = self._chains[backend] = BlockChains(self.block_size)
            hashes = chains.stored(list(hashes), event.parent_block_hash, token_ids, event.block_size)  # type: ignore[attr-defined]
        elif kind == "BlockRemoved" and backend in self._chains:
            hashes = self._chains[backend].removed(list(hashes))
        if kind == "BlockStored":
            blocks = self._blocks.setdefault(backend, set())
            new = [h for h in hashes if h not in blocks]
            if new:
                blocks.update(new)
                self._owners.add_many(new, self._owners.bit(backend))
                if spec:
                    for h in new:
                        spec.pop(h, None)
        elif kind == "BlockRemoved":
            held = self._blocks.get(backend)
            if held or spec:
                bit = self._owners.bit(backend)
                for h in hashes:
                    confirmed = held is not None and h in held
                    if confirmed or (spec is not None and spec.pop(h, None) is not None):
                        if confirmed and held is not None:
                            held.discard(h)
                        self._owners.discard(h, bit)
        else:
            raise ValueError(f"unknown KV event {kind}")

    def speculate(self, backend: str, hashes: Sequence[int], deadline: float) -> None:
        """Enter ``hashes`` for ``backend`` until ``deadline`` unless a BlockStored confirms them first."""
        held = self._blocks.get(backend, ())
        spec = self._spec.setdefault(backend, OrderedDict())
        new = [h for h in hashes if h not in held and h not in spec]
        for h in hashes:
            if h in spec:
                spec[h] = deadline
                spec.move_to_end(h)
        if new:
            spec.update(dict.fromkeys(new, deadline))
            self._owners.add_many(new, self._owners.bit(backend))

    def expire(self, now: float) -> None:
        """Drop speculative entries whose deadline is at or before ``now``."""
        for backend, spec in self._spec.items():
            if not spec or next(iter(spec.values())) > now:
                continue
            held = self._blocks.get(backend, ())
            bit = self._owners.bit(backend)
            while spec:
                h, deadline = next(iter(spec.items()))
                if deadline > now:
                    break
                del spec[h]
                if h not in held:
                    self._owners.discard(h, bit)

    def speculative(self, backend: str) -> frozenset[int]:
        """Unconfirmed entries of ``backend``."""
        return frozenset(self._spec.get(backend, ()))

    def clear(self, backend: str) -> None:
        """Forget every block of ``backend`` (AllBlocksCleared, or a resync after a gap); keeps its
        sequence."""
        held = self._blocks.pop(backend, None) or set()
        held.update(self._spec.pop(backend, ()))
        chains = self._chains.get(backend)
        if chains is not None:
            chains.clear()
        if held:
            bit = self._owners.bit(backend)
            for h in held:
                self._owners.discard(h, bit)
        self._owners.release(backend)

    def forget(self, backend: str) -> None:
        """Drop the backend entirely, sequence included (it was removed, or its publisher restarted)."""
        self.clear(backend)
        self._chains.pop(backend, None)
        self._seq.pop(backend, None)
        self._sources.discard(backend)

    def publishes(self, backend: str) -> bool:
        """Whether ``backend``'s engine has sent KV events since it was added (or last forgotten)."""
        return backend in self._sources

    @property
    def any_source(self) -> bool:
        return bool(self._sources)

    def match(self, hashes: Sequence[int]) -> dict[str, int]:
        """Backend -> leading blocks of ``hashes`` it holds (longest chained prefix; zeros omitted)."""
        return self._owners.match(hashes)

    def blocks(self, backend: str) -> frozenset[int]:
        return frozenset(self._blocks.get(backend, ()))

    def last_seq(self, backend: str) -> int | None:
        return self._seq.get(backend)
