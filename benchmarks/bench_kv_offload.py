"""How much does a second KV tier buy on this traffic? One simulated engine, HBM only vs HBM + host tier.

Replays the Mooncake trace (``../shared/data/mooncake_synthetic_trace.jsonl``: 3,993 requests, mean prompt
15.3k tokens, 22M distinct prompt tokens, far beyond one engine's HBM) on one engine core driven by
``infctl.sim.virtual.run_until_idle`` (virtual clock, no sleeping), four times over the same requests:

* ``hbm``: the profile's HBM pool alone;
* ``tier@FAST``, ``tier@SLOW``: plus a write-through host tier of ``--tier-gib`` GiB loaded back at FAST and
  SLOW GB/s (defaults 50, PCIe 5.0 x16, and 5, a pool reached over a 40 Gb/s NIC);
* ``wb@FAST``: the same tier, write-back (only evicted blocks are copied out).

Each prompt is the concatenation of one block of tokens per trace ``hash_id`` (equal ids give equal blocks),
so the trace's prefix reuse reaches the engine's prefix cache. Arrival times are the trace's, stretched by
``--stretch`` so one engine is not overloaded (the trace came from a cluster).

Each arm runs twice: paced by the trace (TTFT p50/p99, and how busy the engine was: sum of step times over
the makespan) and saturated, every request queued at t=0 (output tokens per second of makespan: the
engine's capacity on this traffic; an open-loop run's throughput is only its offered load). Printed side by
side with ratios to ``hbm``, with the paced run's prefix hit rate split into HBM and tier. Break-even: a load
beats recomputing when ``kv_bytes_per_token / bandwidth < beta1`` (llama3-8b-h100: 131,072 B / 17.25 us =
7.6 GB/s), so the SLOW arm shows a tier that is hit but does not pay in TTFT.

    python benchmarks/bench_kv_offload.py [--requests 3993] [--stretch 4] [--tier-gib 512]
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass
from pathlib import Path
from statistics import quantiles

from infctl.bench.workloads.mooncake import sample_trace
from infctl.sim.offload import OffloadTier
from infctl.sim.profiles import SimProfile, get_profile
from infctl.sim.scheduler import EngineCore
from infctl.sim.types import SimRequest, StepOutput
from infctl.sim.virtual import run_until_idle
from infctl.tokens import synth_words, token_ids

TRACE = sample_trace()  # the public Mooncake trace shipped in data/
TRACE_BLOCK = 512
"""Tokens per trace hash id."""


def trace_requests(path: Path, n: int, stretch: float, max_len: int) -> list[SimRequest]:
    """The first ``n`` trace entries as engine requests (prompt + output clipped to ``max_len``)."""
    blocks: dict[int, list[int]] = {}
    out: list[SimRequest] = []
    with path.open() as f:
        rows = [json.loads(line) for line, _ in zip(f, range(n), strict=False)]
    t0 = rows[0]["timestamp"]
    for i, row in enumerate(rows):
        ids: list[int] = []
        for h in row["hash_ids"]:
            if h not in blocks:
                blocks[h] = token_ids(synth_words(TRACE_BLOCK, salt=h))
            ids += blocks[h]
        n_out = min(row["output_length"], max_len // 2)
        ids = ids[: min(row["input_length"], max_len - n_out)]
        arrival = (row["timestamp"] - t0) / 1000.0 * stretch
        out.append(SimRequest(f"r{i}", ids, n_out, arrival, seed=i))
    return out


@dataclass
class Run:
    hbm_hit: float
    tier_hit: float
    ttft_p50: float
    ttft_p99: float
    out_tps: float
    busy: float
    wall: float

    @property
    def hit(self) -> float:
        return self.hbm_hit + self.tier_hit


def run(profile: SimProfile, offload: OffloadTier | None, requests: list[SimRequest]) -> Run:
    core = EngineCore(profile, offload=offload)
    busy = 0.0

    def on_step(_: float, out: StepOutput) -> None:
        nonlocal busy
        busy += out.duration

    started = time.perf_counter()
    traces = run_until_idle(core, requests, on_step=on_step)
    wall = time.perf_counter() - started
    ttfts = sorted(t.ttft for t in traces.values() if t.ttft is not None)
    cuts = quantiles(ttfts, n=100, method="inclusive")
    end = max(t.finish_time or 0.0 for t in traces.values())
    makespan = end - min(r.arrival for r in requests)
    stats = core.stats()
    prompts = sum(len(r.prompt_ids) for r in requests)
    tier_hits = stats.tier.hit_tokens if stats.tier else 0
    return Run(
        hbm_hit=stats.prefix_hits / prompts,
        tier_hit=tier_hits / prompts,
        ttft_p50=cuts[49],
        ttft_p99=cuts[98],
        out_tps=stats.generation_tokens / makespan,
        busy=busy / makespan,
        wall=wall,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", type=Path, default=TRACE)
    ap.add_argument("--requests", type=int, default=3993, help="first N trace entries (default: all)")
    ap.add_argument("--stretch", type=float, default=4.0, help="multiply the trace's inter-arrival times")
    ap.add_argument("--profile", default="llama3-8b-h100")
    ap.add_argument("--tier-gib", type=float, default=512.0, help="host tier size, GiB")
    ap.add_argument("--fast-gbps", type=float, default=50.0)
    ap.add_argument("--slow-gbps", type=float, default=5.0)
    args = ap.parse_args()

    profile = get_profile(args.profile)
    requests = trace_requests(args.trace, args.requests, args.stretch, profile.max_model_len)
    prompt_tokens = sum(len(r.prompt_ids) for r in requests)
    hbm_tokens = profile.num_gpu_blocks * profile.block_size
    tier = OffloadTier(capacity_gib=args.tier_gib, load_gbps=args.fast_gbps, store_gbps=args.fast_gbps)
    tier_tokens = tier.num_blocks(profile.kv_bytes_per_token * profile.block_size) * profile.block_size
    break_even = profile.kv_bytes_per_token / profile.beta1_us / 1e3
    print(
        f"{len(requests)} Mooncake requests ({prompt_tokens / 1e6:.1f}M prompt tokens, arrivals "
        f"x{args.stretch:g}) on one {profile.name}: HBM {hbm_tokens / 1e3:.0f}k tokens, tier "
        f"{args.tier_gib:g} GiB = {tier_tokens / 1e6:.2f}M tokens; recompute break-even {break_even:.1f} GB/s"
    )
    slow = OffloadTier(capacity_gib=args.tier_gib, load_gbps=args.slow_gbps, store_gbps=args.slow_gbps)
    wb = OffloadTier(
        capacity_gib=args.tier_gib,
        load_gbps=args.fast_gbps,
        store_gbps=args.fast_gbps,
        write_policy="write_back",
    )
    burst = [SimRequest(r.request_id, r.prompt_ids, r.max_tokens, 0.0, seed=r.seed) for r in requests]
    arms = {
        "hbm": None,
        f"tier@{args.fast_gbps:g}": tier,
        f"tier@{args.slow_gbps:g}": slow,
        f"wb@{args.fast_gbps:g}": wb,
    }
    results = {name: (run(profile, off, requests), run(profile, off, burst)) for name, off in arms.items()}
    base, base_sat = results["hbm"]
    header = f"{'arm':<10}{'hit':>7}{'hbm':>7}{'tier':>7}{'ttft p50':>10}{'x':>6}{'ttft p99':>10}{'x':>6}"
    header += f"{'busy':>7}{'x':>6}{'sat tok/s':>11}{'x':>6}{'wall s':>8}"
    print(header)
    for name, (a, sat) in results.items():
        cells = [
            f"{name:<10}{a.hit:>7.1%}{a.hbm_hit:>7.1%}{a.tier_hit:>7.1%}",
            f"{a.ttft_p50:>10.3f}{a.ttft_p50 / base.ttft_p50:>6.2f}",
            f"{a.ttft_p99:>10.3f}{a.ttft_p99 / base.ttft_p99:>6.2f}",
            f"{a.busy:>7.1%}{a.busy / base.busy:>6.2f}",
            f"{sat.out_tps:>11.0f}{sat.out_tps / base_sat.out_tps:>6.2f}{a.wall + sat.wall:>8.1f}",
        ]
        print("".join(cells))


if __name__ == "__main__":
    from saved import save_if_asked  # benchmarks/saved.py

    save_if_asked()  # --save PATH: this run's output, command, date and commit as a result record
    main()
