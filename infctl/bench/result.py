"""``BenchResult`` and its JSON form (``schema_version`` 1).

The JSON names ``ttft``, ``tpot``, ``itl`` and ``e2e`` with ``mean``, ``median``, ``std``, ``p50`` ...
``p99.9``, ``max`` in milliseconds; throughput per second; an ``aliases`` block repeats the figures under the
names other tools use (vLLM's ``mean_ttft_ms``, guidellm's ``time_to_first_token_ms``, aiperf's
``inter_chunk_latency``). Each alias maps to the metric with the same *definition*, not the same name:
guidellm's and aiperf's "inter-token latency" is our TPOT; aiperf's "inter-chunk latency" is our ITL.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from infctl.bench.config import BenchConfig
from infctl.bench.metrics import Summary
from infctl.bench.records import RequestRecord
from infctl.bench.server_view import ServerView
from infctl.bench.stats import Distribution

SCHEMA = "infctl.bench.result"
SCHEMA_VERSION = 1
LATENCIES = ("ttft", "tpot", "itl", "e2e")


@dataclass(frozen=True)
class StageResult:
    index: int
    label: str
    requested_rate: float | None
    """Mean rate the stage asked for (None: concurrency or replay)."""
    achieved_rate: float | None
    """Sends per second actually made, first to last send of the stage."""
    summary: Summary


@dataclass(frozen=True)
class ClientHealth:
    """Whether the load generator, not the server, limited the run (REFERENCE.md section 3)."""

    send_lag: Distribution
    """Actual send time minus scheduled time, seconds."""
    loop_lag: Distribution
    """Event-loop oversleep of a 10 ms timer, seconds: high values mean a busy client."""
    cpu_util: float
    """Client process CPU time / wall time (1.0 = one core busy)."""
    requested_rate: float | None
    achieved_rate: float | None
    gate_waits: int = 0
    limited: bool = False
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class RunMetadata:
    label: str
    started_at: str
    """ISO 8601, UTC."""
    finished_at: str
    infctl_version: str
    model: str
    url: str
    host: str
    python: str
    interrupted: bool = False
    workload_exhausted: bool = False


@dataclass
class BenchResult:
    """Everything one run measured. ``to_dict()`` is the saved JSON; ``requests`` the per-request rows."""

    config: BenchConfig
    metadata: RunMetadata
    summary: Summary
    stages: list[StageResult]
    client: ClientHealth
    server: ServerView | None
    requests: list[RequestRecord]
    warnings: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return self.metadata.label

    def to_dict(self, *, timeseries: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "schema": SCHEMA,
            "schema_version": SCHEMA_VERSION,
            "metadata": {
                **self.metadata.__dict__,
                "api": self.config.api,
                "endpoint": self.config.request_path,
                "seed": self.config.seed,
                "workload": self.config.workload.model_dump(mode="json"),
                "load": _json_safe(self.config.load.model_dump(mode="python")),
                "slo": self.config.slo.to_dict() if self.config.slo else None,
            },
            **summary_dict(self.summary),
            "client": client_dict(self.client),
            "stages": [
                {
                    "index": s.index,
                    "label": s.label,
                    "requested_rate": _num(s.requested_rate),
                    "achieved_rate": _num(s.achieved_rate),
                    **summary_dict(s.summary),
                }
                for s in self.stages
            ],
            "server": server_dict(self.server),
            "warnings": list(self.warnings),
        }
        if timeseries:
            out["timeseries"] = timeseries_dict(self.requests, self.summary.duration_s)
        out["aliases"] = aliases(self.summary)
        return out


def summary_dict(s: Summary) -> dict[str, Any]:
    good = None
    if s.slo is not None:
        good = {"slo": s.slo.to_dict(), "requests_per_s": _num(s.goodput), "good": s.good,
                "fraction": _num(s.good_fraction)}  # fmt: skip
    return {
        "requests": {"total": s.total, "completed": s.completed, "failed": s.failed},
        "duration_s": _num(s.duration_s),
        "throughput": {
            "requests_per_s": _num(s.request_throughput),
            "input_tokens_per_s": _num(s.input_throughput),
            "output_tokens_per_s": _num(s.output_throughput),
            "total_tokens_per_s": _num(s.total_token_throughput),
        },
        "goodput": good,
        **{name: getattr(s, name).scaled(1000.0) for name in LATENCIES},
        "tokens": {
            "input_total": s.total_input_tokens,
            "output_total": s.total_output_tokens,
            "input": s.input_tokens.scaled(1.0),
            "output": s.output_tokens.scaled(1.0),
            "cached_total": s.cached_tokens,
            "cached_fraction": _num(s.cached_fraction),
        },
        "errors": {
            "total": s.failed,
            "by_class": s.errors,
            "by_kind": s.error_kinds,
            "examples": s.error_examples,
        },
    }


def client_dict(c: ClientHealth) -> dict[str, Any]:
    return {
        "requested_rate": _num(c.requested_rate),
        "achieved_rate": _num(c.achieved_rate),
        "send_lag_ms": c.send_lag.scaled(1000.0),
        "loop_lag_ms": c.loop_lag.scaled(1000.0),
        "cpu_util": _num(c.cpu_util),
        "gate_waits": c.gate_waits,
        "limited": c.limited,
        "warnings": list(c.warnings),
    }


def server_dict(v: ServerView | None) -> dict[str, Any] | None:
    if v is None:
        return None
    return {
        "prefix_cache_hit_rate": _num(v.hit_rate),
        "preemptions": v.preemptions,
        "queue_peak": v.queue_peak,
        "samples": v.samples,
        "engines": [
            {"url": e.url, "engine": e.engine, "prefix_cache_hit_rate": _num(e.hit_rate),
             "prefix_queries": e.prefix_queries, "prefix_hits": e.prefix_hits, "preemptions": e.preemptions,
             "prompt_tokens": e.prompt_tokens, "generation_tokens": e.generation_tokens,
             "queue_peak": e.queue_peak, "running_peak": e.running_peak, "kv_usage_peak": e.kv_usage_peak,
             "error": e.error}
            for e in v.engines
        ],
    }  # fmt: skip


def timeseries_dict(records: list[RequestRecord], duration_s: float, max_points: int = 300) -> dict[str, Any]:
    """Per-bucket completions, output tokens (spread over content events) and median TTFT by send time."""
    if not records:
        return {"bucket_s": 1.0, "t": [], "requests_per_s": [], "output_tokens_per_s": [], "ttft_p50_ms": [],
                "errors": []}  # fmt: skip
    t0 = min(r.sent_s for r in records)
    bucket = max(1.0, math.ceil(duration_s / max_points)) if duration_s > 0 else 1.0
    n = int(duration_s // bucket) + 1
    done, errs, toks = [0] * n, [0] * n, [0.0] * n
    ttfts: list[list[float]] = [[] for _ in range(n)]

    def slot(t: float) -> int:
        return min(n - 1, max(0, int((t - t0) // bucket)))

    for r in records:
        if r.error is not None:
            errs[slot(r.end_s)] += 1
            continue
        done[slot(r.end_s)] += 1
        if r.chunk_times:
            ttfts[slot(r.sent_s)].append(r.chunk_times[0] - r.sent_s)
            per = r.output_tokens / len(r.chunk_times)
            for t in r.chunk_times:
                toks[slot(t)] += per
    # the last bucket covers only what is left of the run
    widths = [bucket] * (n - 1) + [max(duration_s - (n - 1) * bucket, 1e-3)]
    return {
        "bucket_s": bucket,
        "t": [round(i * bucket, 3) for i in range(n)],
        "requests_per_s": [round(x / w, 3) for x, w in zip(done, widths, strict=True)],
        "output_tokens_per_s": [round(x / w, 3) for x, w in zip(toks, widths, strict=True)],
        "ttft_p50_ms": [round(sorted(v)[len(v) // 2] * 1000.0, 3) if v else None for v in ttfts],
        "errors": errs,
    }


def aliases(s: Summary) -> dict[str, Any]:
    """The same figures under other tools' names (see the module docstring for the mapping)."""
    vllm: dict[str, Any] = {
        "duration": _num(s.duration_s),
        "completed": s.completed,
        "failed": s.failed,
        "total_input_tokens": s.total_input_tokens,
        "total_output_tokens": s.total_output_tokens,
        "request_throughput": _num(s.request_throughput),
        "request_goodput": _num(s.goodput),
        "output_throughput": _num(s.output_throughput),
        "total_token_throughput": _num(s.total_token_throughput),
    }
    for ours, theirs in (("ttft", "ttft"), ("tpot", "tpot"), ("itl", "itl"), ("e2e", "e2el")):
        d = getattr(s, ours).scaled(1000.0)
        for stat in ("mean", "median", "std", "p50", "p90", "p95", "p99", "p99.9"):
            vllm[f"{stat}_{theirs}_ms"] = d[stat]

    def stats(dist: Distribution, factor: float) -> dict[str, Any]:
        d = dist.scaled(factor)
        return {k: d[k] for k in ("mean", "median", "std", "min", "max", "p50", "p90", "p95", "p99", "p99.9")}

    guidellm = {
        "requests_per_second": _num(s.request_throughput),
        "output_tokens_per_second": _num(s.output_throughput),
        "tokens_per_second": _num(s.total_token_throughput),
        "time_to_first_token_ms": stats(s.ttft, 1000.0),
        "inter_token_latency_ms": stats(s.tpot, 1000.0),
        "request_latency": stats(s.e2e, 1.0),
    }
    aiperf = {
        "request_throughput": _num(s.request_throughput),
        "output_token_throughput": _num(s.output_throughput),
        "time_to_first_token": stats(s.ttft, 1000.0),
        "inter_token_latency": stats(s.tpot, 1000.0),
        "inter_chunk_latency": stats(s.itl, 1000.0),
        "request_latency": stats(s.e2e, 1000.0),
    }
    return {"vllm": vllm, "guidellm": guidellm, "aiperf": aiperf}


def _num(x: float | None) -> float | None:
    if x is None or math.isnan(x) or math.isinf(x):
        return None
    return round(x, 6)


def _json_safe(obj: Any) -> Any:
    """Infinite rates as the string "inf" (JSON has no infinity)."""
    if isinstance(obj, float) and math.isinf(obj):
        return "inf"
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_json_safe(v) for v in obj]
    return obj
