"""The greedy full-knowledge baseline: a router that sees every engine's true cache and prefill queue.

It sees what no live router can: every engine's true cache contents and its true prefill queue, at the
moment each request arrives. It does not see the future. Each request goes to the backend minimising

    uncached prompt tokens + load_weight x prefill tokens queued ahead of it

which, with ``load_weight`` 1, is the backend that returns this request's first token soonest: one token
of hit is worth exactly one token of queue, so it leaves a prefix's holder as soon as the holder's queue
is longer than the prefix. That is a TTFT-first objective, not a hit-rate one, and greedy: it is **not a
ceiling**. On bench_router's Mooncake run (4 engines, fluid model) it reaches 35.8% where cache_aware
reaches 37.2% (0.59 and 0.61 of the pooled-MIN bound). cache_aware itself deciding on the engines' true
caches does no better than on its approximate index (benchmarks/bench_router_sim.py ``--policy
"cache_aware (true caches)"``: 37.1%, 36.9..37.1 over 5 variants). One-off throwaway routers over the
same simulation (not kept) gave this greedy cost 30.3% at load weight 1 and 35.6% at 0.3, and no better
than 37.0% with a cost for the blocks a placement would evict that a later request sends (knowledge of
the future): on these LRU engines the four caches already act nearly as one LRU cache (cache_aware is at
0.95 of it, with no block cached on two engines).

The ceilings a hit rate should be read against are ``infctl.router.ceiling``'s: every block sent before,
and one pooled cache of the fleet's size under MIN (a bound no router can beat) and under LRU.

Pure: a trace and a fluid engine model in, a :class:`ReplayResult` out (see ``infctl.router.replay``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from infctl.router.hashing import mix
from infctl.router.replay import Fleet, FluidModel, ReplayResult, TraceRequest
from infctl.router.snapshot import Backend


@dataclass(frozen=True, slots=True)
class OracleSettings:
    load_weight: float = 1.0
    """Weight of the prefill tokens already queued on a backend, relative to the request's own uncached
    tokens. 1 minimises each request's time to first token; 0 is pure cache affinity (hot-spots)."""


def oracle_choice(fleet: Fleet, item: TraceRequest, settings: OracleSettings) -> tuple[str, int]:
    """(backend, blocks it truly holds) with the lowest cost; ties go to the fewest queued tokens, then
    to a hash of (request, backend), the same for every run."""
    req, now, rate = item.request, item.arrival, fleet.model.prefill_tokens_per_s
    held = fleet.cached(req.block_hashes, now)

    def key(b: Backend) -> tuple[float, float, int]:
        uncached = max(0, req.prompt_tokens - held.get(b.id, 0) * req.block_size)
        queued = fleet.queue_wait_s(b.id, now) * rate
        return (uncached + settings.load_weight * queued) / b.weight, queued, -mix(req.key, b.key)

    best = min((b for b in fleet.backends if b.routable), key=key)
    return best.id, held.get(best.id, 0)


def oracle_replay(
    backends: Sequence[Backend],
    trace: Iterable[TraceRequest],
    model: FluidModel,
    settings: OracleSettings | None = None,
) -> ReplayResult:
    """Route ``trace`` with full knowledge of the engines (see the module docstring)."""
    settings = settings or OracleSettings()
    fleet = Fleet(backends, model)
    for item in trace:
        chosen, held = oracle_choice(fleet, item, settings)
        fleet.dispatch(item, chosen, "oracle_hit" if held else "oracle_miss")
    return fleet.result
