"""RouterCore: a policy plus the state it learns (prefix indexes, round-robin cursor), still without I/O.

The live router, the cluster simulator and the benchmarks each hold one RouterCore per router replica and call
``route`` per request, ``apply_kv_events`` per event batch. Everything else is the pure policy code.
"""

from __future__ import annotations

from collections.abc import Iterable

from infctl.router.kv_index import ApplyResult, KVIndex
from infctl.router.policies.pd import PDDecision, PDSettings, pick_pd
from infctl.router.policies.pipeline import Policy
from infctl.router.policies.types import Decision, PolicyState
from infctl.router.prefix_index import ApproxPrefixIndex, capacity_entries
from infctl.router.snapshot import RequestInfo, Snapshot


class RouterCore:
    def __init__(self, policy: Policy, *, block_size: int = 16) -> None:
        self.policy = policy
        """Replace it to change policy at run time (indexes and cursor are kept)."""
        self.state = PolicyState()
        self.approx = ApproxPrefixIndex(policy.settings.default_index_entries)
        self.precise = KVIndex(block_size)
        """Engines' KV events re-hashed into the router's blocks of ``block_size`` tokens."""

    def matches(self, request: RequestInfo, now: float = 0.0) -> dict[str, int]:
        """Backend -> leading blocks of the request it holds, from the index the policy uses (``auto``: the
        deeper of the two). ``now`` (the snapshot's clock) expires unconfirmed speculative entries of the
        precise index."""
        if not request.block_hashes or self.policy.index == "none":
            return {}
        index = self.policy.index
        if index == "precise":
            self.precise.expire(now)
            return self.precise.match(request.block_hashes)
        guessed = self.approx.match(request.block_hashes)
        if index == "approx" or not self.precise.any_source:
            return guessed
        # auto: the deeper of the two per backend. Events add what the router did not route itself (other
        # replicas' traffic, blocks reported before a restart); the router's own record keeps a prefix's
        # home after the engine evicted it, so it is recomputed where it was rather than wherever load
        # happens to be lowest, which would churn the other engines' caches.
        self.precise.expire(now)
        for backend, depth in self.precise.match(request.block_hashes).items():
            if depth > guessed.get(backend, 0):
                guessed[backend] = depth
        return guessed

    def decide(self, snapshot: Snapshot, request: RequestInfo) -> Decision:
        """Choose a backend without updating the approximate index (call ``learn`` once dispatched, off the
        request's critical path)."""
        return self.policy.decide(
            snapshot, request, matches=self.matches(request, snapshot.now), state=self.state
        )

    def route(self, snapshot: Snapshot, request: RequestInfo) -> Decision:
        """``decide`` then ``learn``."""
        decision = self.decide(snapshot, request)
        self.learn(snapshot, request, decision.backend_id)
        return decision

    def route_pd(self, snapshot: Snapshot, request: RequestInfo, pd: PDSettings | None = None) -> PDDecision:
        decision = pick_pd(
            snapshot,
            request,
            matches=self.matches(request, snapshot.now),
            settings=self.policy.settings,
            pd=pd,
            upstreams=self.policy.upstreams,
            buckets=self.policy.buckets,
        )
        self.learn(snapshot, request, decision.prefill or decision.decode)
        return decision

    def learns(self, request: RequestInfo) -> bool:
        """Whether :meth:`learn` would record anything for ``request`` (callers that defer it skip
        scheduling a no-op: a policy without a prefix index, or a prompt without a full block)."""
        return bool(request.block_hashes) and self.policy.index != "none"

    def learn(
        self, snapshot: Snapshot, request: RequestInfo, backend_id: str, *, first: int | None = None
    ) -> None:
        """Record that ``backend_id`` will cache the request's blocks: in the approximate index, and (index
        precise or auto) as speculative entries of the precise index that its KV events confirm or let
        expire. ``first``: only the leading blocks, enough to steer the next request with this prefix here
        (a caller learns the rest later: hashing and recording a long prompt's every block costs ~0.5 ms)."""
        if not self.learns(request):
            return
        hashes = request.block_hashes if first is None else request.block_hashes[:first]
        index = self.policy.index
        if index != "approx" and not request.estimated:
            ttl = self.policy.settings.speculative_ttl_s
            if ttl > 0:
                self.precise.speculate(backend_id, hashes, snapshot.now + ttl)
            if index == "precise":
                return
        sig = snapshot.state(backend_id).signals
        capacity = capacity_entries(
            sig.cache_capacity_tokens if sig else None,
            request.block_size,
            self.policy.settings.default_index_entries,
        )
        self.approx.record(backend_id, hashes, capacity)

    def apply_kv_events(self, backend_id: str, seq: int, events: Iterable[object]) -> ApplyResult:
        """Feed one numbered KV event batch from ``backend_id``'s engine to the precise index."""
        return self.precise.apply(backend_id, seq, events)

    def forget(self, backend_id: str) -> None:
        """A backend left or restarted: drop what the indexes believe it caches."""
        self.approx.forget(backend_id)
        self.precise.forget(backend_id)
