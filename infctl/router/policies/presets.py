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
  What did close most of the Mooncake gap is the cost scorer's duplicate weights (see
  ``scorers.CostParams``): recomputing blocks that exactly one other backend holds weighs extra, since the
  copy also evicts something the target caches. A flat extra weight of 1 brought the virtual clock's
  Mooncake hit rate from 35.8% to 36.9%, live 36.7% (rounds 36.9, 36.5) beside sglang-router 37.0% and
  vllm-router 37.2% (TTFT ahead). Where the rest went (benchmarks/bench_router_sim.py --explain, with
  its vllm-router model, which reproduces the live 37.2% at 36.9%): the engines held 37.15% of prompt
  blocks on the best-stocked engine at routing time but 36.70% on the one cache_aware chose (84
  decisions left a conversation's sole holder to save ~6k queued and ~12k decode token-equivalents);
  vllm-router never leaves the holder (36.99% / 36.99%: its gate at 64 in-flight requests does not fire
  here). So a lone copy now weighs 20 (``duplicate_weight``) while its holder carries at most 8 requests
  more than the mean (``duplicate_slack``), 1 beyond: virtual 37.15% (37.10-37.24 over 5 scrape-interval
  variants, every one above both peer models), TTFT p50/p99 20.7/280 ms as before. The slack is what
  keeps a hot prefix fanning out: weight 20 without it raised the hot-prefix replay's TTFT p99 at 40 req/s
  from 337 to 712 ms (round robin 524); with it 330 ms, every engine within 1.28x its fair share.
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
