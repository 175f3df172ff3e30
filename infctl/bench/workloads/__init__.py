"""Workloads: deterministic request sources (``--seed``), built from a typed spec.

Files (traces, datasets) are read and validated completely by :func:`build_workload`, before any load.
"""

from __future__ import annotations

from infctl.bench.workloads.base import Api, RequestSpec, Workload
from infctl.bench.workloads.lengths import LengthDist
from infctl.bench.workloads.mooncake import TraceEntry, TraceWorkload, read_trace
from infctl.bench.workloads.multiturn import MultiTurnWorkload
from infctl.bench.workloads.sharegpt import ShareGPTWorkload, read_sharegpt
from infctl.bench.workloads.specs import (
    MixComponent,
    MixtureSpec,
    MultiTurnSpec,
    RandomSpec,
    SharedPrefixSpec,
    ShareGPTSpec,
    TraceSpec,
    WorkloadSpec,
)
from infctl.bench.workloads.synthetic import MixtureWorkload, RandomWorkload, SharedPrefixWorkload

WORKLOAD_KINDS = ("random", "mixture", "shared-prefix", "multi-turn", "trace", "sharegpt")


def build_workload(spec: WorkloadSpec, api: Api, seed: int = 0) -> Workload:
    """The workload ``spec`` describes; reads and validates any file it names (ConfigError with file:line)."""
    if isinstance(spec, RandomSpec):
        return RandomWorkload(spec, api, seed)
    if isinstance(spec, MixtureSpec):
        return MixtureWorkload(spec, api, seed)
    if isinstance(spec, SharedPrefixSpec):
        return SharedPrefixWorkload(spec, api, seed)
    if isinstance(spec, MultiTurnSpec):
        return MultiTurnWorkload(spec, api, seed)
    if isinstance(spec, TraceSpec):
        return TraceWorkload(spec, api, tuple(read_trace(spec.path, spec.block_size)), seed)
    return ShareGPTWorkload(spec, api, tuple(read_sharegpt(spec)), seed)


__all__ = [
    "WORKLOAD_KINDS",
    "Api",
    "LengthDist",
    "MixComponent",
    "MixtureSpec",
    "MixtureWorkload",
    "MultiTurnSpec",
    "MultiTurnWorkload",
    "RandomSpec",
    "RandomWorkload",
    "RequestSpec",
    "ShareGPTSpec",
    "ShareGPTWorkload",
    "SharedPrefixSpec",
    "SharedPrefixWorkload",
    "TraceEntry",
    "TraceSpec",
    "TraceWorkload",
    "Workload",
    "WorkloadSpec",
    "build_workload",
    "read_sharegpt",
    "read_trace",
]
