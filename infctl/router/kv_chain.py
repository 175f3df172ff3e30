"""Engine KV blocks in the router's own hashing, so a prompt the router hashed matches what engines report.

Engines hash their blocks their own way (vLLM: SHA-256 or a per-process seeded hash, over its block size of
16 on GPU or 128 on CPU), which the router cannot reproduce and need not: every BlockStored carries the
block's token ids and its parent's hash, so the router re-hashes the ids into its own chain
(``infctl.tokens.block_hashes``, at its own block size) and remembers, per engine block, the router blocks
it produced and where the chain stands after it. BlockRemoved names engine hashes; they map back here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from infctl.tokens import extend_chain, root_digest

HASH_SEED = ""
"""Seed of the router's block-hash chains (``RequestInfo.from_ids``): the same for every model, since
backends are filtered by model before their blocks are matched."""


@dataclass(frozen=True, slots=True)
class _Link:
    digest: bytes
    """The router chain's digest after the last router block this engine block completed."""
    pending: tuple[int, ...]
    """Token ids after that block, not yet a full router block (engine blocks smaller than the router's)."""
    produced: tuple[int, ...]
    """Router block hashes this engine block completed."""


class BlockChains:
    """One engine's blocks, keyed by the engine's hash, as chains in the router's hashing."""

    __slots__ = ("_links", "block_size", "unplaced")

    def __init__(self, block_size: int) -> None:
        self.block_size = block_size
        self._links: dict[int, _Link] = {}
        self.unplaced = 0
        """Engine blocks whose parent was never seen (stored before the router subscribed): not indexed."""

    def stored(
        self, hashes: Sequence[int], parent: int | None, token_ids: Sequence[int], engine_block: int
    ) -> list[int]:
        """Router hashes of newly cached engine blocks (``hashes``, with their ``token_ids`` end to end)."""
        if parent is None:
            link = _Link(root_digest(HASH_SEED), (), ())
        else:
            found = self._links.get(parent)
            if found is None:
                self.unplaced += len(hashes)
                return []
            link = found
        out: list[int] = []
        for i, h in enumerate(hashes):
            ids = (*link.pending, *token_ids[i * engine_block : (i + 1) * engine_block])
            produced, digest = extend_chain(link.digest, ids, self.block_size)
            used = len(produced) * self.block_size
            link = _Link(digest, ids[used:], produced)
            self._links[h] = link
            out.extend(produced)
        return out

    def removed(self, hashes: Sequence[int]) -> list[int]:
        """Router hashes of evicted engine blocks (unknown ones are skipped)."""
        out: list[int] = []
        for h in hashes:
            link = self._links.pop(h, None)
            if link is not None:
                out.extend(link.produced)
        return out

    def clear(self) -> None:
        self._links.clear()
