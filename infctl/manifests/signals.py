"""Which metric of each engine carries which signal, for alert rules and dashboards.

Built from the engine modules' own constants (never spelled here), keyed by their ``NAME``.
"""

from __future__ import annotations

from dataclasses import dataclass

from infctl.engines import sglang, vllm


@dataclass(frozen=True)
class EngineMetrics:
    queue: str
    running: str
    kv_usage: str
    """Gauge, 0..1."""
    ttft: str
    """Histogram family."""
    ttft_buckets: tuple[float, ...]
    itl: str
    e2e: str
    prompt_tokens: str
    generation_tokens: str
    model_label: str


METRICS: dict[str, EngineMetrics] = {
    vllm.NAME: EngineMetrics(
        queue=vllm.NUM_REQUESTS_WAITING,
        running=vllm.NUM_REQUESTS_RUNNING,
        kv_usage=vllm.KV_CACHE_USAGE_PERC,
        ttft=vllm.TIME_TO_FIRST_TOKEN,
        ttft_buckets=vllm.TTFT_BUCKETS,
        itl=vllm.INTER_TOKEN_LATENCY,
        e2e=vllm.E2E_REQUEST_LATENCY,
        prompt_tokens=vllm.PROMPT_TOKENS,
        generation_tokens=vllm.GENERATION_TOKENS,
        model_label=vllm.MODEL_NAME_LABEL,
    ),
    sglang.NAME: EngineMetrics(
        queue=sglang.NUM_QUEUE_REQS,
        running=sglang.NUM_RUNNING_REQS,
        kv_usage=sglang.TOKEN_USAGE,
        ttft=sglang.TIME_TO_FIRST_TOKEN,
        ttft_buckets=sglang.TTFT_BUCKETS,
        itl=sglang.INTER_TOKEN_LATENCY,
        e2e=sglang.E2E_REQUEST_LATENCY,
        prompt_tokens=sglang.PROMPT_TOKENS,
        generation_tokens=sglang.GENERATION_TOKENS,
        model_label=sglang.MODEL_NAME_LABEL,
    ),
}


def slo_bucket(metrics: EngineMetrics, slo_s: float) -> float:
    """The largest TTFT bucket bound not above ``slo_s`` (a histogram can only count below its bounds)."""
    fitting = [b for b in metrics.ttft_buckets if b <= slo_s]
    return max(fitting) if fitting else metrics.ttft_buckets[0]


def prom_le(bound: float) -> str:
    """A bucket bound as Prometheus client libraries print it in ``le`` (``1.0``, ``2.5``, ``0.1``)."""
    return repr(float(bound))
