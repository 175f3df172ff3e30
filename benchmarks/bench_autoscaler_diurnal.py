"""A compressed diurnal day served by an autoscaled fleet and by a static fleet sized for the peak.

    python benchmarks/bench_autoscaler_diurnal.py [--shape consumer|business] [--day-hours 8] [--seed 1]

The autoscaler is ``infctl.autoscaler.policy.desired_replicas`` itself, unchanged, fed every 15 s with the
signals the daemon reads (queue, running, KV usage per ready engine, the fleet's TTFT p99 over the last
interval) on a virtual clock. Reported: GPU-hours of both fleets, the saving, and the share of one-minute
windows whose TTFT p99 (by arrival) met the SLO, with the hours of the windows that missed it. The static
fleet is the smallest that meets the SLO in every window of the busiest two hours (found by bisection).

The engine model (documented so the figures can be judged). Each engine is continuous batching with chunked
prefill, timed by the simulator's ``llama3-8b-h100`` step model (``infctl.sim.profiles``): a step costs
``beta0 + beta2 * running`` plus ``beta1`` per prompt token it carries, and carries at most
``max_num_batched_tokens - running`` prompt tokens. Time advances in ``dt`` ticks; within a tick the engine
prefills waiting requests first come first served at the chunked rate and every step decodes one token for
every running sequence. A request's first token comes when its prompt is fully prefilled; it then holds KV
(prompt + tokens so far) until its output is done. Admission stops at ``max_num_seqs`` or when the KV cache
is full, so the waiting queue is the prefill backlog, as in vLLM. The router sends each request to the ready,
non-draining engine with the fewest waiting + running requests. A new engine takes ``--startup`` seconds
(pulling weights, warming up) before it serves and costs GPU time from the moment it is asked for; an engine
being removed first stops receiving requests, finishes those it holds (drain) and only then is released.
Load is Poisson with a 24-point hourly shape (``SHAPES``), the day compressed ``24 / day-hours`` times while
startup, windows and cooldowns keep their real lengths (ramps are that much steeper than in life, the harder
case for an autoscaler). Prompts are lognormal around 6k tokens, outputs exponential with mean 400.

This fluid model is not the simulator's engine (``infctl simulate compare autoscaling`` runs the unchanged
``EngineCore``). So that the two can be judged side by side, every run first replays the same requests at
the same times (~70% of one engine's prefill capacity) through one fluid engine and through one simulated
engine core on the same profile, and prints how far the fluid TTFT p50/p99 are from the core's.
"""

from __future__ import annotations

import argparse
import heapq
import math
import random
import time
from collections import deque
from dataclasses import dataclass, field

from infctl.autoscaler.policy import desired_replicas
from infctl.autoscaler.schedule import parse_window
from infctl.autoscaler.settings import PolicyConfig, UnitConfig
from infctl.autoscaler.snapshot import ReplicaSignals, ScalerState, ScalingSnapshot, UnitStatus
from infctl.bench.config import LoadPlan, Stage
from infctl.bench.workloads import LengthDist, RandomSpec
from infctl.sim.cluster import SimConfig
from infctl.sim.cluster import simulate as simulate_cluster
from infctl.sim.cluster.scenarios.diurnal import SHAPES  # hourly rate over the peak, shared with simulate
from infctl.sim.cluster.scenarios.pools import prefill_rate
from infctl.sim.profiles import SimProfile, get_profile

DT = 0.2
"""Tick of the virtual clock, seconds."""
WINDOW = 60.0
"""SLO windows, seconds of virtual time."""
PROMPT_MEDIAN, OUTPUT_MEAN = 6000, 400
"""Request sizes, tokens: lognormal prompts (sigma 0.6), exponential outputs (RAG- and agent-like)."""


@dataclass
class Request:
    arrival: float
    prompt: int
    output: int
    left: float = 0.0
    """Prompt tokens still to prefill."""


@dataclass
class Engine:
    p: SimProfile
    ready_at: float
    draining: bool = False
    waiting: deque[Request] = field(default_factory=deque)
    running: list[tuple[float, float, int]] = field(default_factory=list)
    """Heap of (step count at which it finishes, step count when it started, prompt tokens)."""
    steps: float = 0.0
    kv_prompt: int = 0
    kv_start_sum: float = 0.0

    @property
    def kv_capacity(self) -> int:
        return self.p.num_gpu_blocks * self.p.block_size

    @property
    def kv_used(self) -> float:
        return self.kv_prompt + len(self.running) * self.steps - self.kv_start_sum

    def load(self) -> int:
        return len(self.waiting) + len(self.running)

    def queue(self) -> int:
        """Waiting requests as vLLM counts them: the one being prefilled is already running."""
        return len(self.waiting) - int(bool(self.waiting) and self.waiting[0].left < self.waiting[0].prompt)

    def tick(self, now: float, dt: float, ttfts: list[tuple[float, float]]) -> None:
        b0, b1, b2 = self.p.beta0_us * 1e-6, self.p.beta1_us * 1e-6, self.p.beta2_us * 1e-6
        budget = dt
        while self.waiting and budget > 1e-9 and len(self.running) < self.p.max_num_seqs:
            head = self.waiting[0]
            if self.kv_used + head.prompt > self.kv_capacity:
                break
            chunk = max(1, self.p.max_num_batched_tokens - len(self.running))
            step = b0 + b2 * len(self.running) + b1 * chunk
            rate = chunk / step  # prompt tokens per second, decoding the running batch meanwhile
            done = min(head.left, rate * budget)
            spent = done / rate
            head.left -= done
            budget -= spent
            self.steps += spent / step
            if head.left <= 1e-9:
                self.waiting.popleft()
                ttfts.append((head.arrival, now + (dt - budget) - head.arrival))
                heapq.heappush(self.running, (self.steps + head.output - 1, self.steps, head.prompt))
                self.kv_prompt += head.prompt
                self.kv_start_sum += self.steps
        if self.running and budget > 0:
            self.steps += budget / (b0 + b2 * len(self.running))
        while self.running and self.running[0][0] <= self.steps:
            _, started, prompt = heapq.heappop(self.running)
            self.kv_prompt -= prompt
            self.kv_start_sum -= started


@dataclass
class Outcome:
    gpu_hours: float
    slo_share: float
    windows: int
    requests: int
    p99_worst: float
    replicas_min: int
    replicas_max: int
    scale_events: int
    missed: tuple[float, ...]
    """Time of day (hours) of the windows that missed the SLO."""


def rate_at(t: float, day_s: float, peak: float, shape: tuple[float, ...]) -> float:
    hour = (t / day_s * 24.0) % 24.0
    i = int(hour)
    frac = hour - i
    return peak * (shape[i] * (1 - frac) + shape[(i + 1) % 24] * frac)


def request(rng: random.Random, t: float) -> Request:
    prompt = max(64, int(rng.lognormvariate(math.log(PROMPT_MEDIAN), 0.6)))
    output = max(8, int(rng.expovariate(1 / OUTPUT_MEAN)))
    return Request(arrival=t, prompt=prompt, output=output, left=float(prompt))


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.99 * len(ordered)) - 1)]


def simulate(
    args: argparse.Namespace,
    policy: PolicyConfig | None,
    static: int,
    span: tuple[float, float],
    warmup: float = 0.0,
) -> Outcome:
    """``span`` of the day on ``static`` engines, or autoscaled by ``policy`` from ``static`` engines
    ``warmup`` seconds before the span (measured from its start only, so the fleet is in its steady state)."""
    # The warm-up draws from its own generator, so both fleets see the very same requests in ``span``.
    profile, rng = get_profile("llama3-8b-h100"), random.Random(args.seed + 1)
    day_s = args.day_hours * 3600
    engines = [Engine(profile, ready_at=span[0] - warmup) for _ in range(static)]
    state, ttfts, window_ttfts = ScalerState(), [], {}
    gpu_s, events, sizes = 0.0, 0, []
    t, requests = span[0] - warmup, 0
    next_decision = t
    while t < span[1] or any(e.load() for e in engines):
        if span[0] <= t < span[0] + DT:
            rng = random.Random(args.seed)
        if t < span[1]:
            for _ in range(_poisson(rng, rate_at(t, day_s, args.peak_rps, SHAPES[args.shape]) * DT)):
                ready = [e for e in engines if e.ready_at <= t and not e.draining]
                min(ready, key=Engine.load).waiting.append(request(rng, t + rng.random() * DT))
                requests += t >= span[0]
        tick: list[tuple[float, float]] = []
        for e in engines:
            if e.ready_at <= t:
                e.tick(t, DT, tick)
        ttfts += tick
        for arrival, ttft in tick:
            if arrival >= span[0]:
                window_ttfts.setdefault(int(arrival // WINDOW), []).append(ttft)
        if policy is not None and t >= next_decision and t < span[1]:
            snap, current = _observe(engines, t, day_s, ttfts)
            decision = desired_replicas(snap, current, policy, state)
            state, ttfts = decision.state, []
            moved = _actuate(engines, decision.desired()["both"], t, args.startup, profile)
            events += moved * (t >= span[0])
            next_decision = t + args.interval
        engines = [e for e in engines if not (e.draining and not e.load())]
        if t >= span[0]:
            gpu_s += DT * len(engines)
            sizes.append(len(engines))
        t += DT
    met = {w: p99(v) <= args.slo for w, v in window_ttfts.items()}
    worst = max(p99(v) for v in window_ttfts.values())
    missed = tuple(round(w * WINDOW / day_s * 24, 2) for w, ok in sorted(met.items()) if not ok)
    return Outcome(
        gpu_s / 3600 * args.gpus_per_replica,
        sum(met.values()) / len(met),
        len(met),
        requests,
        worst,
        min(sizes),
        max(sizes),
        events,
        missed,
    )


def _observe(
    engines: list[Engine], t: float, day_s: float, ttfts: list[tuple[float, float]]
) -> tuple[ScalingSnapshot, dict[str, UnitStatus]]:
    asked = [e for e in engines if not e.draining]
    ready = [e for e in asked if e.ready_at <= t]
    replicas = tuple(
        ReplicaSignals(
            f"e{i}",
            "both",
            ready=True,
            queue=e.queue(),
            running=len(e.running),
            kv_usage=e.kv_used / e.kv_capacity,
        )
        for i, e in enumerate(ready)
    )
    ttft = p99([x for _, x in ttfts]) if ttfts else None
    snap = ScalingSnapshot(now=t, replicas=replicas, ttft_p99_s=ttft, time_of_day_s=t / day_s * 86400)
    return snap, {"both": UnitStatus(desired=len(asked), ready=len(ready))}


def _actuate(engines: list[Engine], desired: int, t: float, startup: float, profile: SimProfile) -> int:
    asked = [e for e in engines if not e.draining]
    if desired > len(asked):
        engines += [Engine(profile, ready_at=t + startup) for _ in range(desired - len(asked))]
    # Scaling in takes the youngest first (still-starting ones cost nothing to drop), as the supervisor does.
    for e in sorted(asked, key=lambda e: -e.ready_at)[: max(0, len(asked) - desired)]:
        e.draining = True
    return int(desired != len(asked))


def _poisson(rng: random.Random, mean: float) -> int:
    # Knuth for small means, a rounded normal for large ones (both fine at this resolution).
    if mean > 30:
        return max(0, round(rng.gauss(mean, math.sqrt(mean))))
    limit, k, p = math.exp(-mean), 0, 1.0
    while True:
        p *= rng.random()
        if p <= limit:
            return k
        k += 1


def engine_check(seed: int, requests: int = 600) -> tuple[tuple[float, float], tuple[float, float], float]:
    """TTFT (p50, p99) of the same requests on one fluid engine and on one simulated ``EngineCore``
    (llama3-8b-h100), and the offered load as a share of the engine's prefill rate."""
    profile = get_profile("llama3-8b-h100")
    mean_prompt = PROMPT_MEDIAN * math.exp(0.6**2 / 2)
    rate = 0.7 * prefill_rate(profile) / mean_prompt
    cfg = SimConfig(
        workload=RandomSpec(
            input=LengthDist(kind="lognormal", mean=mean_prompt, sigma=0.6),
            output=LengthDist(kind="lognormal", mean=OUTPUT_MEAN, sigma=1.0),
        ),
        load=LoadPlan(stages=[Stage(rate=rate, num_requests=requests)]),
        engines=1,
        profile=profile,
        policy="least_load",
        seed=seed,
    )
    records = sorted(simulate_cluster(cfg).bench.requests, key=lambda r: r.sent_s)
    core = [r.chunk_times[0] - r.sent_s for r in records if r.chunk_times]
    engine, ttfts, t = Engine(profile, ready_at=0.0), [], 0.0
    pending = [
        Request(r.sent_s, r.input_tokens, max(1, r.output_tokens), float(r.input_tokens)) for r in records
    ]
    while pending or engine.load():
        while pending and pending[0].arrival < t + DT:
            engine.waiting.append(pending.pop(0))
        engine.tick(t, DT, ttfts)
        t += DT
    fluid = [x for _, x in ttfts]
    return (
        (_median(fluid), p99(fluid)),
        (_median(core), p99(core)),
        rate * mean_prompt / prefill_rate(profile),
    )


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def autoscaler_policy(args: argparse.Namespace) -> PolicyConfig:
    """The profile's defaults for windows, cooldowns and steps; the KV band and queue levels an operator would
    pick for a 2 s TTFT on 6k-token prompts (flags); the router's TTFT p99 as a signal; optional schedules."""
    return PolicyConfig(
        units=(UnitConfig("both", args.min, args.max),),
        ttft_slo_s=args.ttft_target or args.slo,
        kv_up=args.kv[0],
        kv_down=args.kv[1],
        queue_up=args.queue[0],
        queue_down=args.queue[1],
        down_window_s=args.down_window,
        max_step_down=args.max_step_down,
        max_step_up=args.max_step_up,
        schedules=tuple(parse_window(s) for s in args.schedule),
    )


def peak_static(args: argparse.Namespace) -> int:
    """The smallest static fleet that meets the SLO in every window of the busiest two hours (bisection)."""
    day_s = args.day_hours * 3600
    span = (11 / 24 * day_s, 13 / 24 * day_s)
    lo, hi = 1, args.max
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if simulate(args, None, mid, span).slo_share >= 1.0 else (mid + 1, hi)
    return lo


def _pair(text: str) -> tuple[float, float]:
    up, down = text.split(":")
    return float(up), float(down)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--day-hours", type=float, default=8.0, help="Length of the compressed day, hours.")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="consumer", help="Hourly load shape.")
    ap.add_argument("--peak-rps", type=float, default=100.0, help="Requests per second at the peak.")
    ap.add_argument("--slo", type=float, default=2.0, help="TTFT p99 objective, seconds.")
    ap.add_argument("--startup", type=float, default=90.0, help="Seconds before a new engine serves.")
    ap.add_argument("--interval", type=float, default=15.0, help="Seconds between decisions.")
    ap.add_argument("--min", type=int, default=2, help="Fewest engines (and the night floor).")
    ap.add_argument("--max", type=int, default=24, help="Most engines.")
    ap.add_argument(
        "--ttft-target",
        type=float,
        default=None,
        help="TTFT p99 the autoscaler scales up above, s. Default: the SLO.",
    )
    ap.add_argument("--schedule", action="append", default=[], help="'HH:MM-HH:MM min=N' floors.")
    ap.add_argument("--kv", type=_pair, default=(0.75, 0.55), help="KV usage up:down. 0.75:0.55.")
    ap.add_argument("--queue", type=_pair, default=(4.0, 1.0), help="Waiting per replica up:down. 4:1.")
    ap.add_argument("--down-window", type=float, default=300.0, help="Scale-down window, s. 300.")
    ap.add_argument("--max-step-down", type=int, default=1, help="Units removed at once. 1.")
    ap.add_argument("--max-step-up", type=int, default=4, help="Units added at once. 4.")
    ap.add_argument("--gpus-per-replica", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    started = time.perf_counter()
    fluid, core, load = engine_check(args.seed)
    print(
        f"engine model check (the same requests on one engine at {load:.0%} of its prefill rate): TTFT "
        f"p50/p99 fluid {fluid[0]:.2f}/{fluid[1]:.2f} s vs the simulator's EngineCore {core[0]:.2f}/"
        f"{core[1]:.2f} s ({fluid[0] / core[0] - 1:+.0%} / {fluid[1] / core[1] - 1:+.0%}); "
        "`infctl simulate compare autoscaling` runs the EngineCore"
    )
    n_peak = peak_static(args)
    day = (0.0, args.day_hours * 3600)
    static = simulate(args, None, n_peak, day)
    # The autoscaled fleet runs from 22:00 the evening before, so midnight finds it in its steady state.
    warmup = 2 / 24 * day[1]
    auto = simulate(args, autoscaler_policy(args), math.ceil(n_peak * SHAPES[args.shape][22]), day, warmup)
    saved = 1 - auto.gpu_hours / static.gpu_hours
    print(
        f"{args.shape} day compressed to {args.day_hours:g} h, peak {args.peak_rps:g} req/s, TTFT p99 SLO "
        f"{args.slo:g} s per {WINDOW:.0f} s window, engine startup {args.startup:g} s, seed {args.seed}"
    )
    print(f"{'fleet':<24}{'GPU-hours':>10}{'SLO met':>9}{'worst p99':>11}{'engines':>9}{'requests':>10}")
    for name, o in ((f"static for the peak ({n_peak})", static), ("autoscaled", auto)):
        print(
            f"{name:<24}{o.gpu_hours:>10.2f}{o.slo_share:>9.2%}{o.p99_worst:>10.2f}s"
            f"{o.replicas_min:>4}-{o.replicas_max:<4}{o.requests:>10}"
        )
    print(
        f"saved {saved:.1%} of GPU-hours ({auto.scale_events} scale events); SLO held {auto.slo_share:.2%} "
        f"of {auto.windows} windows (goal: >= 35% saved, >= 99% held)"
    )
    if auto.missed:
        print("missed at (hour of day): " + ", ".join(f"{h:.2f}" for h in auto.missed))
    print(f"[{time.perf_counter() - started:.0f} s]")


if __name__ == "__main__":
    from saved import save_if_asked  # benchmarks/saved.py

    save_if_asked()  # --save PATH: this run's output, command, date and commit as a result record
    main()
