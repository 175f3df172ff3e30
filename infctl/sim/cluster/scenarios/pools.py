"""Length pools sized by the autoscaler's planner from the traffic's measured demand (pure).

The demand of each length bucket (prompt tokens and output tokens per second) is measured on the workload
the scenario sends, as the router counts it per bucket; what one engine serves comes from the profile's step
model: prompt tokens per second at full chunks, and output tokens per second at the largest batch whose step
stays within the ITL objective. :func:`~infctl.autoscaler.planner.plan_pools` then divides the engines.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from infctl.autoscaler.planner import PoolDemand, PoolPlan, plan_pools
from infctl.bench.workloads import WorkloadSpec, build_workload
from infctl.sim.profiles import SimProfile

ITL_OBJECTIVE_S = 0.05
"""Decode capacity is counted at this inter-token latency (DeepSeek-V3's production anchor, ~50 ms)."""


@dataclass(frozen=True, slots=True)
class Bucket:
    name: str
    max_tokens: int | None
    """Longest prompt it takes; None: the rest."""


def prefill_rate(profile: SimProfile) -> float:
    """Prompt tokens per second one engine prefills at full chunks (no cache hits, no decoding)."""
    chunk = profile.max_num_batched_tokens
    return chunk / profile.step_time(chunk, 0, 0)


def decode_rate(profile: SimProfile, context_tokens: float, itl_s: float = ITL_OBJECTIVE_S) -> float:
    """Output tokens per second one engine decodes at the largest batch (up to ``max_num_seqs``) of
    ``context_tokens``-long sequences whose step takes at most ``itl_s`` (one sequence if none does)."""
    per_seq = profile.step_time(0, 1, round(context_tokens)) - profile.step_time(0, 0, 0)
    room = itl_s - profile.step_time(0, 0, 0)
    batch = max(1, min(profile.max_num_seqs, int(room / per_seq) if per_seq > 0 else profile.max_num_seqs))
    return batch / profile.step_time(0, batch, round(batch * context_tokens))


def bucket_demand(
    workload: WorkloadSpec,
    sample: tuple[int, int],
    buckets: Sequence[Bucket],
    rate: float,
    profile: SimProfile,
) -> list[PoolDemand]:
    """Each bucket's demand when ``workload`` is sent at ``rate`` requests per second, measured on its first
    ``sample = (requests, seed)``: prompt and output tokens per second, with one engine's capacities for
    that bucket's sequences."""
    prompt = [0.0] * len(buckets)
    output = [0.0] * len(buckets)
    count = [0] * len(buckets)
    n, seed = sample
    total = 0
    for spec in itertools.islice(build_workload(workload, "completions", seed).requests(), n):
        total += 1
        i = next(
            (k for k, b in enumerate(buckets) if b.max_tokens is None or spec.input_tokens <= b.max_tokens),
            len(buckets) - 1,
        )
        prompt[i] += spec.input_tokens
        output[i] += spec.max_tokens
        count[i] += 1
    per_request = rate / max(total, 1)
    out = []
    for i, b in enumerate(buckets):
        context = (prompt[i] + output[i] / 2) / count[i] if count[i] else 0.0
        out.append(
            PoolDemand(
                b.name,
                prompt_tps=prompt[i] * per_request,
                decode_tps=output[i] * per_request,
                replica_prefill_tps=prefill_rate(profile),
                replica_decode_tps=decode_rate(profile, context),
            )
        )
    return out


def planned_pools(demand: Sequence[PoolDemand], engines: int) -> tuple[list[str], PoolPlan]:
    """Each engine's pool (in pool order) when the planner divides ``engines`` one-GPU-unit engines."""
    plan = plan_pools(demand, engines)
    return [name for name, n in plan.replicas for _ in range(n)], plan
