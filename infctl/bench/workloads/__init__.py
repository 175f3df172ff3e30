"""Workloads: deterministic request sources (``--seed``), built from a typed spec.

Files (traces, datasets) are read and validated completely by :func:`build_workload`, before any load.
"""

from __future__ import annotations

from infctl.bench.workloads.base import Api, RequestSpec, Workload
from infctl.bench.workloads.lengths import LengthDist
from infctl.bench.workloads.mooncake import TraceEntry, TraceWorkload, read_trace
from infctl.bench.workloads.multiturn import MultiTurnWorkload
from infctl.bench.workloads.prompts import WORDS, Prompts, TokenizerPrompts, make_prompts, prefetched
from infctl.bench.workloads.scripts import TEXT_KINDS, TextKind
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


def build_workload(spec: WorkloadSpec, api: Api, seed: int = 0, prompts: Prompts = WORDS) -> Workload:
    """The workload ``spec`` describes; reads and validates any file it names (ConfigError with file:line).
    ``prompts`` writes the synthetic workloads' prompts (``make_prompts``: a tokenizer and a text kind)."""
    if isinstance(spec, RandomSpec):
        return RandomWorkload(spec, api, seed, prompts=prompts)
    if isinstance(spec, MixtureSpec):
        return MixtureWorkload(spec, api, seed, prompts=prompts)
    if isinstance(spec, SharedPrefixSpec):
        return SharedPrefixWorkload(spec, api, seed, prompts=prompts)
    if isinstance(spec, MultiTurnSpec):
        return MultiTurnWorkload(spec, api, seed, prompts=prompts)
    if isinstance(spec, TraceSpec):
        return TraceWorkload(spec, api, tuple(read_trace(spec.path, spec.block_size)), seed)
    return ShareGPTWorkload(spec, api, tuple(read_sharegpt(spec)), seed)


__all__ = [
    "TEXT_KINDS",
    "WORDS",
    "WORKLOAD_KINDS",
    "Api",
    "LengthDist",
    "MixComponent",
    "MixtureSpec",
    "MixtureWorkload",
    "MultiTurnSpec",
    "MultiTurnWorkload",
    "Prompts",
    "RandomSpec",
    "RandomWorkload",
    "RequestSpec",
    "ShareGPTSpec",
    "ShareGPTWorkload",
    "SharedPrefixSpec",
    "SharedPrefixWorkload",
    "TextKind",
    "TokenizerPrompts",
    "TraceEntry",
    "TraceSpec",
    "TraceWorkload",
    "Workload",
    "WorkloadSpec",
    "build_workload",
    "make_prompts",
    "prefetched",
    "read_sharegpt",
    "read_trace",
]
