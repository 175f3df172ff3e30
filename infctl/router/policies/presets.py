"""Named policies, matching ``infctl router --policy NAME``. Each is a config dict as ``build_policy`` takes.

- ``round_robin``, ``random``: ignore load and cache (baselines).
- ``least_load``: fewest requests per unit of weight (router in-flight count or engine running + waiting).
- ``power_of_two``: two candidates drawn from the request id, the less loaded wins.
- ``session``: rendezvous hash of the session header; least load when the header is absent.
- ``kv_usage``: most free KV cache, with the router's own in-flight count against herding between scrapes.
- ``prefix`` / ``prefix_precise``: plain longest prefix match (approximate / KV-event index). Kept as the
  naive baseline: with a shared system prompt it piles traffic onto one backend. Prefer ``cache_aware``.
- ``weighted``: llm-d's default scorer weights (queue 2, kv_usage 2, prefix 3).
- ``cache_aware``: the recommended one. Dynamo-style cost (uncached prompt + queued prefill + weighted
  decode tokens) behind a load gate that only steps in on gross imbalance (SGLang's test, AIBrix's band at
  3 sigma), since the cost's own load terms already spread a hot prefix. On the approximate index; add
  ``index: auto`` to also use the engines' KV events (the deeper of the two matches per backend: useful with
  several router replicas) or ``index: precise`` for the events alone (with speculative entries for blocks
  routed but not yet reported). Live (benchmarks/bench_router.py, 2 shared cores, one router) ``auto``
  ties on the shared-prefix workload (79% vs 78% hit rate, same TTFT p50) and still loses on the Mooncake
  trace (34% vs 35%, TTFT p50 60 vs 47 ms): decoding every engine's events costs this Python router more
  than the extra accuracy gains, so ``approx`` stays the default. The decode term is what spreads a hot
  prefix at low rates: ``cost_decode_weight`` 0.02 instead of 0.1 gains ~0.6 points of Mooncake hit rate
  live (35.7% -> 36.4%, median of 2 rounds, bench_router --repeat 2) and in the replay, but lets one engine
  do 3.1x its fair share of prefill in the hot-prefix replay at 10 req/s (0.07 still 1.54x), so 0.1 stays.
  What did close most of the Mooncake gap is the cost scorer's ``duplicate_weight`` (default 1, see
  ``scorers.CostParams``): recomputing blocks that exactly one other backend holds counts twice, since the
  copy also evicts something the target caches. Where the points went (benchmarks/bench_router_sim.py,
  bench_router's Mooncake run on the virtual clock, which tracks the live hit rate within ~0.1 point):
  the engines held 36.98% of prompt blocks on the best-stocked engine at routing time but 35.85% on the
  chosen one; 135 decisions passed over a backend holding ~95% of the prompt to save ~1,100 queued and
  ~1,000 decode token-equivalents. With the weight: virtual 35.8% -> 36.9% (medians of 5 scrape-interval
  variants, spreads 35.4-36.0 / 36.6-36.9), TTFT p50 21.9 -> 21.0 ms, p99 unchanged; the replays agree
  (bench_router-shaped Mooncake 37.2 -> 37.3%, 8-engine Mooncake 51.2 -> 52.0%, hot prefix +0.5 to
  +0.8 points with max/fair at most 1.38); live (bench_router --repeat 2): 36.3% in the one clean round
  beside 35.8-36.1% without it, shared prefixes 81.1% vs 80.5%; a second run 36.7% (rounds 36.9, 36.5),
  TTFT p50/p99 29/294 ms, beside sglang-router 37.0% (36.8, 37.3) 36/373 ms and vllm-router 37.2% (37.5,
  37.0) 62/415 ms: level on hit rate within the rounds' noise, ahead on TTFT. Weight 2 gave 37.0% (36.8,
  37.1) in that run, noise again, and 36.8% on the virtual clock, so 1 stays. Counting every recomputed
  block twice (also those two or more backends hold) piles a hot prefix 1.87x at 10 req/s; weight 3 or 6 gains
  0.1-0.3 more points on Mooncake but doubles the hot-prefix replay's TTFT p99 at 40-80 req/s.
"""

from __future__ import annotations

from typing import Any

PRESETS: dict[str, dict[str, Any]] = {
    "round_robin": {"filters": ["role"], "scorers": [], "picker": "round_robin", "index": "none"},
    "random": {"filters": ["role"], "scorers": [], "picker": "random", "index": "none"},
    "least_load": {"filters": ["role"], "scorers": [{"name": "load"}], "picker": "max", "index": "none"},
    "power_of_two": {
        "filters": ["role"],
        "scorers": [{"name": "load"}],
        "picker": "power_of_two",
        "index": "none",
    },
    "session": {
        "filters": ["role"],
        "scorers": [{"name": "session", "weight": 4}, {"name": "load", "weight": 1}],
        "picker": "max",
        "index": "none",
    },
    "kv_usage": {
        "filters": ["role"],
        "scorers": [{"name": "kv_usage", "weight": 2}, {"name": "load", "weight": 1}],
        "picker": "max",
        "index": "none",
    },
    "prefix": {"filters": ["role"], "scorers": [{"name": "prefix"}], "picker": "max", "index": "approx"},
    "prefix_precise": {
        "filters": ["role"],
        "scorers": [{"name": "prefix"}],
        "picker": "max",
        "index": "precise",
    },
    "weighted": {
        "filters": ["role"],
        "scorers": [
            {"name": "queue", "weight": 2},
            {"name": "kv_usage", "weight": 2},
            {"name": "prefix", "weight": 3},
        ],
        "picker": "max",
        "index": "approx",
    },
    "cache_aware": {
        "filters": ["role", "load_gate"],
        "scorers": [{"name": "cost"}],
        "picker": "max",
        "index": "approx",
    },
}
