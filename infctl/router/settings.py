"""Tunables of the routing policies, with units and defaults (overridable under ``settings:`` in a policy
config)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from infctl.errors import ConfigError


@dataclass(frozen=True, slots=True)
class PolicySettings:
    """Every threshold a policy reads; defaults follow the reference routers (REFERENCE.md section 2)."""

    stale_after_s: float = 0.2
    """Engine signals older than this (seconds) count as saturated; fresh backends are preferred (llm-d)."""
    default_index_entries: int = 31_250
    """Approximate-index entries per backend when its engine does not report a cache size (llm-d)."""
    saturation_queue: float = 5.0
    """Waiting requests at which a backend is saturated (llm-d: queue/5)."""
    saturation_kv: float = 0.8
    """KV-cache usage at which a backend is saturated (llm-d: kv/0.8)."""
    queued_request_tokens: float = 512.0
    """Prompt tokens assumed per engine-reported waiting request (covers other router replicas' traffic)."""

    cost_prefill_weight: float = 1.0
    """cache_aware: weight of prefill tokens (uncached prompt + queued prefill) in the cost (Dynamo: 1)."""
    cost_queue_weight: float = 0.25
    """cache_aware: weight of prefill tokens already queued on a backend, relative to this request's own
    uncached tokens. Below 1 when the engine batches prefills (chunked prefill with a token budget): a
    queued prompt then shares steps with this one instead of delaying it by its full length. A longer prompt
    is charged more of the queue, all of it once it is as long as the queue (``queue_wait``)."""
    cost_decode_weight: float = 0.1
    """cache_aware: weight of in-flight context tokens (the decode load) in the cost. Dynamo uses 1 per
    block, but a running sequence delays a new prompt's prefill far less than a prompt token does (a few
    microseconds per step against ~17 us per prefill token on an H100 8B fit); 0.1 keeps conversations on
    their cache while still spreading at low load (the hot-prefix replay: 0.25 lost 2-4 points of hit rate
    and raised TTFT). Raise it when KV memory, not prefill, is the bottleneck."""
    shared_quorum: float = 0.75
    """cache_aware: a prefix held by at least this fraction of candidates (and at least two) counts as held by
    all, so it neither attracts traffic nor penalises the backends still missing it. 1.0 = only prefixes
    every candidate holds; lower replicates hot prefixes sooner. At 0.5 two holders out of four sufficed, and
    live on the demo workload (4 engines) the router then spread 60 of 320 requests of already-placed
    prefixes to backends that lacked them; 0.75 (three of four, six of eight) spreads none of those, while
    the hot-prefix replay keeps every engine within 1.32x its fair share."""
    speculative_ttl_s: float = 2.0
    """Precise index: after routing, the request's blocks count as held by the chosen backend for this long
    (seconds) unless its KV events confirm them first, so a burst sharing a new prefix does not scatter
    while the first prefill runs (vllm-router's kv_aware: 2 s). 0 turns speculation off."""

    gate_abs: float = 32.0
    """Load gate (SGLang/AIBrix): in-flight requests between most and least loaded above which affinity is
    ignored and only the least loaded backends stay candidates. A safety net: the cost's load terms do the
    everyday spreading, and a tighter gate forces cache misses (the hot-prefix and Mooncake replays: at 8
    it cost 1-3 points of hit rate and up to 70% of TTFT p99; SGLang itself uses 64)."""
    gate_ratio: float = 1.5
    """... and the ratio most/least loaded that must also be exceeded (SGLang: 1.5)."""
    band_sigmas: float = 3.0
    """Load band (AIBrix): otherwise only backends with load <= mean + band_sigmas * stddev (+ band_slack)
    stay candidates for prefix affinity. AIBrix uses 1; at 1 the band excluded the prefix holder whenever it
    ran two or three requests more than its peers, trading a cache hit for nothing at low load."""
    band_slack: float = 1.0
    """In-flight requests added to both limits so that one request more or less never excludes a backend."""

    def with_overrides(self, overrides: Mapping[str, Any], *, path: str = "settings") -> PolicySettings:
        """A copy with ``overrides`` applied; an unknown key or a wrong type raises ConfigError (key path)."""
        known = {f.name: f for f in fields(self)}
        clean: dict[str, Any] = {}
        for key, value in overrides.items():
            if key not in known:
                raise ConfigError(
                    f"{path}.{key}: unknown setting",
                    hint=f"known settings: {', '.join(sorted(known))}",
                )
            default = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ConfigError(f"{path}.{key}: expected a number, got {value!r}")
            clean[key] = type(default)(value)
        return replace(self, **clean)
