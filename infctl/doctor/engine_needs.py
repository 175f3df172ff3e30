"""What doctor needs to know about each engine beyond its adapter: which signals the router and autoscaler
read (current metric name first, deprecated fallbacks after), and the flags that fix what is wrong.

Engine names and metric names come from the adapters' modules; nothing here is spelled twice.
"""

from __future__ import annotations

from dataclasses import dataclass

from infctl.engines import sglang, vllm


@dataclass(frozen=True, slots=True)
class Signal:
    """One engine-neutral signal and the metric names that carry it."""

    name: str
    """As operators say it: queue, running, KV usage, ..."""
    metrics: tuple[str, ...]
    """Current name first, then deprecated fallbacks the adapter still reads."""
    users: str
    """Who reads it (shown when it is missing)."""
    required: bool = True
    """Missing -> fail; else warn (routing still works, some decisions get worse)."""


@dataclass(frozen=True, slots=True)
class EngineFacts:
    signals: tuple[Signal, ...]
    deprecated: tuple[str, ...] = ()
    """Deprecated names an engine may still expose (warned about wherever they appear)."""
    deprecated_fix: str | None = None
    prefix_caching_fix: str = "enable prefix caching"
    metrics_flag_fix: str | None = None
    server_info_paths: tuple[str, ...] = ()
    """JSON endpoints describing the server's configuration, tried in order."""
    prefix_off_key: str | None = None
    """server-info key that is true when prefix caching is off."""
    metrics_on_key: str | None = None
    """server-info key that is true when /metrics is served."""


_LEGACY_HITS = vllm.GPU_PREFIX_CACHE_HITS.removesuffix("_total")

FACTS: dict[str, EngineFacts] = {
    vllm.NAME: EngineFacts(
        signals=(
            Signal("queue", (vllm.NUM_REQUESTS_WAITING,), "router, autoscaler"),
            Signal("running", (vllm.NUM_REQUESTS_RUNNING,), "router, autoscaler"),
            Signal("KV usage", (vllm.KV_CACHE_USAGE_PERC, vllm.GPU_CACHE_USAGE_PERC), "router, autoscaler"),
            Signal("cache config", (vllm.CACHE_CONFIG_INFO,), "router (prefix index size), doctor", False),
            Signal("prefix hits", (vllm.PREFIX_CACHE_HITS, vllm.GPU_PREFIX_CACHE_HITS, _LEGACY_HITS),
                   "router, bench", False),
            Signal("prompt tokens", (vllm.PROMPT_TOKENS,), "router, bench", False),
        ),
        deprecated=vllm.DEPRECATED,
        deprecated_fix=(
            "drop --show-hidden-metrics-for-version from the vLLM command line, and move dashboards and "
            "alerts to the current names (vllm:kv_cache_usage_perc, vllm:prefix_cache_*_total)"
        ),
        prefix_caching_fix="start vLLM with --enable-prefix-caching (and without --no-enable-prefix-caching)",
    ),
    sglang.NAME: EngineFacts(
        signals=(
            Signal("queue", (sglang.NUM_QUEUE_REQS,), "router, autoscaler"),
            Signal("running", (sglang.NUM_RUNNING_REQS,), "router, autoscaler"),
            Signal("KV usage", (sglang.TOKEN_USAGE,), "router, autoscaler"),
            Signal("cache size", (sglang.MAX_TOTAL_NUM_TOKENS,), "router (prefix index size)", False),
            Signal("prefix hits", (sglang.CACHED_TOKENS,), "router, bench", False),
            Signal("prompt tokens", (sglang.PROMPT_TOKENS,), "router, bench", False),
        ),
        prefix_caching_fix="drop --disable-radix-cache from the SGLang command line",
        metrics_flag_fix="start SGLang with --enable-metrics",
        server_info_paths=("/get_server_info", "/server_info"),
        prefix_off_key="disable_radix_cache",
        metrics_on_key="enable_metrics",
    ),
}


def facts(engine: str) -> EngineFacts:
    """The facts for ``engine`` (an adapter name); an engine without an entry gets none to check."""
    return FACTS.get(engine, EngineFacts(signals=()))
