"""Benchmarks: workloads, the load generator, metrics, reports, comparisons and sweeps.

The entry points::

    result = await run_benchmark(BenchConfig(...), progress=callback)   # or run(cfg) from sync code
    result.to_dict()                                                    # the saved JSON (schema_version 1)
    compare(a, b)                                                       # deltas in percent, a -> b
"""

from infctl.bench.compare import Comparison, Delta, compare
from infctl.bench.config import BenchConfig, LoadPlan, Stage, validate_config
from infctl.bench.load import Progress
from infctl.bench.metrics import RequestMetrics, Summary, request_metrics, summarize
from infctl.bench.records import RequestRecord
from infctl.bench.result import SCHEMA_VERSION, BenchResult, ClientHealth, StageResult
from infctl.bench.run import run, run_benchmark
from infctl.bench.server_view import EngineView, ServerView
from infctl.bench.slo import SLO, parse_slo
from infctl.bench.stats import Distribution, describe
from infctl.bench.workloads import (
    LengthDist,
    MixComponent,
    MixtureSpec,
    MultiTurnSpec,
    RandomSpec,
    SharedPrefixSpec,
    ShareGPTSpec,
    TraceSpec,
)

__all__ = [
    "SCHEMA_VERSION",
    "SLO",
    "BenchConfig",
    "BenchResult",
    "ClientHealth",
    "Comparison",
    "Delta",
    "Distribution",
    "EngineView",
    "LengthDist",
    "LoadPlan",
    "MixComponent",
    "MixtureSpec",
    "MultiTurnSpec",
    "Progress",
    "RandomSpec",
    "RequestMetrics",
    "RequestRecord",
    "ServerView",
    "ShareGPTSpec",
    "SharedPrefixSpec",
    "Stage",
    "StageResult",
    "Summary",
    "TraceSpec",
    "compare",
    "describe",
    "parse_slo",
    "request_metrics",
    "run",
    "run_benchmark",
    "summarize",
    "validate_config",
]
