"""bench_router's two quality runs on the virtual clock: the same requests, engines and router, no waiting.

    python benchmarks/bench_router_sim.py [--only shared|mooncake] [--policy P ...] [--variants 5]
                                          [--explain POLICY]

Each run is ``infctl simulate``'s machinery (``infctl.sim.cluster``): 4 unchanged ``EngineCore``s with
bench_router's cache sizes, the live ``RouterCore`` deciding on snapshots scraped every 100 ms, and the
workloads bench_router sends (shared prefixes: 300 requests at 16 req/s, 2,048 blocks per engine; the
Mooncake trace x8 with prompts x0.25, 16,384 blocks). Its hit rates track the live run's (Mooncake:
cache_aware 35.7% virtual vs 35.6% live, round robin 12.0% vs 12%, decode weight 0.02 36.6% vs 36.4%;
shared prefixes 81.5% vs 81.5%) where bench_policies' fluid replay says 37.2% for cache_aware, and a
run takes seconds and is deterministic, so it is the place to tune a policy before a live run. TTFT here
is the engines' alone: the live router's own CPU time and the shared cores are not in it. The engines
publish KV events, which policies on the ``precise`` or ``auto`` index read as the live router does
(before, those ran here on the approximate index alone; Mooncake, 3 variants: approx 37.2%, auto 37.3%,
precise 37.1%, all within the variants' spread).

Rows: each ``--policy`` (preset or JSON), then "sglang-router (model)": sglang-router 0.3's cache_aware as
it documents it (gate at max - min > 64 and max > 1.5 min in-flight, else the worker with the longest
match if over 30% of the prompt, else the worker whose tree is smallest), on block hashes rather than
characters. It reproduces the live peer within ~1 point (Mooncake 36.5% vs 36.8%; shared 81.5% vs 80.4%).
Then "vllm-router (model)": vllm-router 0.1's cache_aware as its source describes it (the same gate; a
match over 30% of the prompt goes to the worker that first cached the matched node, whatever its load;
otherwise the least loaded worker, not the smallest tree). Mooncake 36.9% vs 37.2% live (rounds 37.5,
37.0); shared 81.0% vs 80.8%. Neither peer model reads engine signals, so its variants do not differ.

Above each table, the ceilings of the same requests on these engines (``infctl.router.ceiling``): every
block some earlier request sent (an unbounded cache), one cache of the 4 engines' total size under MIN
eviction (optimal and offline: no router over these engines can beat it), under LRU (the engines' own
eviction, not a bound) and under LRU that never stores a block no later request sends; "/LRU" and "/MIN"
are each row's hit rate over the pooled LRU and MIN. Mooncake: 64.8%, 60.9%, 39.0%, 55.3%, and
cache_aware's 37.2% is 0.95 of the pooled LRU cache and 0.61 of MIN: the four caches already act nearly
as one LRU cache, and most of what is left is one-off blocks pushing out ones that come back, which every
routing stores somewhere (an engine-side cache policy could recover it; a router cannot).

Policies are chaotic on a trace: one different early decision reshuffles every cache after it, so the
live run's timing noise moves its hit rate by tenths of a point. ``--variants N`` reruns with the router's
scrape interval at 100 ms x (1, 0.93, 1.07, 0.86, 1.14, ...), which shifts what each decision sees as live
timing does (cache_aware on Mooncake: 35.4..36.2% over 5 variants); the columns are medians with the
min..max under them, so a difference inside that spread is noise.

``--explain POLICY`` accounts for every prompt block of one Mooncake run: what some earlier request had
sent (a cache of unbounded size would hold it: 64.9% here, so most misses are capacity misses), what the
best-stocked engine and the chosen one really held when the request was routed, how many decisions passed
the best-stocked engine over, what the engine then reported as cached, and what bench_policies' replay
model (``FluidModel(engine_cache=True)``) would have predicted for the same decisions; then the misses by
cause. cache_aware on Mooncake: first sight 35.06 points, evicted from every engine before the block came
back 27.58, routed away from a holder 0.06, held at routing but not found when computed 0.07 (the peer
models: eviction 28.39 / 27.95, routing away 0.00). Nearly every miss a router could avoid is an
eviction, which only placement (what each engine is made to drop) moves, not a better view of the caches:
``index: auto`` and ``precise`` (the engines' KV events) route within the variants' spread of the
approximate index, and so does cache_aware fed the engines' true caches (``--policy "cache_aware (true
caches)"``: 37.1%, 36.9..37.1 over 5 variants).
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from infctl.bench import LoadPlan, Stage, TraceSpec
from infctl.bench.scenarios import prefix_scenario
from infctl.bench.workloads import build_workload
from infctl.bench.workloads.mooncake import sample_trace
from infctl.router.ceiling import Ceilings, ceilings
from infctl.router.prefix_index import ApproxPrefixIndex
from infctl.router.replay import Fleet, FluidModel, TraceRequest
from infctl.router.snapshot import Backend, RequestInfo
from infctl.sim.cluster import SimConfig, variant_scrape_interval
from infctl.sim.cluster.engine_loop import Simulation
from infctl.sim.cluster.fleet import SimEngine
from infctl.sim.cluster.prompts import prompt_source
from infctl.sim.cluster.result import build_result
from infctl.sim.cluster.routing import SimRouter
from infctl.sim.profiles import LLAMA3_8B_H100

ENGINES = 4
SGLANG = "sglang-router (model)"
VLLM = "vllm-router (model)"


def config(workload: str, policy: str | Mapping[str, Any], variant: int = 0) -> SimConfig:
    """bench_router's run of ``workload`` ("shared" or "mooncake") under ``policy`` (seed 1, as there)."""
    scrape = variant_scrape_interval(variant)  # 100 ms, then 93, 107, 86, 114 ms...
    if workload == "mooncake":
        spec = TraceSpec(path=sample_trace(), time_compression=8.0, input_scale=0.25, max_input_tokens=16000)
        return SimConfig(workload=spec, load=LoadPlan(stages=[Stage()]), engines=ENGINES, policy=policy,
                         profile=LLAMA3_8B_H100.with_overrides(num_gpu_blocks=16384), seed=1,
                         scrape_interval_s=scrape, kv_events=True)  # fmt: skip
    load = LoadPlan(stages=[Stage(rate=16.0, num_requests=300)], warmup=20)
    return SimConfig(workload=prefix_scenario(ENGINES).workload, load=load, engines=ENGINES, policy=policy,
                     profile=LLAMA3_8B_H100.with_overrides(num_gpu_blocks=2048), seed=1,
                     scrape_interval_s=scrape, kv_events=True)  # fmt: skip


class SglangModel(SimRouter):
    """sglang-router's cache_aware (0.3 defaults) in front of the simulated fleet.

    Balanced (in-flight max - min <= 64 or max <= 1.5 min): the worker whose tree matches the longest prefix
    if it covers more than 30% of the prompt, else the worker with the smallest tree. Imbalanced: the least
    loaded. Its trees only grow here (their 67M-character cap is not reached by these runs).
    """

    def __init__(self) -> None:
        super().__init__("round_robin")
        self.tree = ApproxPrefixIndex(1 << 40)
        self.size: Counter[str] = Counter()

    def route(self, info: RequestInfo, expected_tokens: int, now: float) -> str:
        snap = self.pool.snapshot(now)
        ids = [b.id for b in snap.backends if b.routable]
        loads = {b: snap.state(b).inflight for b in ids}
        hi, lo = max(loads.values()), min(loads.values())
        if hi - lo > 64 and hi > 1.5 * lo:
            chosen, reason = min(ids, key=lambda b: (loads[b], b)), "load_gate"
        else:
            m = self.tree.match(info.block_hashes)
            best = max(ids, key=lambda b: (m.get(b, 0), -loads[b], b))
            if m.get(best, 0) > 0.3 * info.num_blocks:
                chosen, reason = best, "prefix_hit"
            else:
                chosen, reason = min(ids, key=lambda b: (self.size[b], b)), "smallest_tree"
        self.size[chosen] += len(self.tree.record(chosen, info.block_hashes).added)
        self.reasons[reason] += 1
        self._cached[info.request_id] = 0
        self.pool.start(chosen, info.prompt_tokens, expected_tokens, cached_tokens=0)
        return chosen


class VllmModel(SimRouter):
    """vllm-router's cache_aware (0.1.x defaults) in front of the simulated fleet, as its source describes it.

    A fork of sglang-router's, with two differences that matter on these runs: below the 30% match threshold
    it takes the least loaded worker (in-flight requests, first in worker order on a tie), not the one whose
    tree is smallest; and the worker it credits with the longest match is the one that first cached that
    tree node (the node's cached tenant), whatever its load. The gate is sglang's (max - min > 64 and
    max > 1.5 min in-flight: least loaded). The tree learns the chosen worker at routing time, and its
    2**25-character per-worker cap is not reached by these runs (no eviction).
    """

    def __init__(self) -> None:
        super().__init__("round_robin")
        self.tree = ApproxPrefixIndex(1 << 40)
        self.first: dict[int, str] = {}
        """Block hash -> the worker that first cached it (the tree node's tenant)."""

    def route(self, info: RequestInfo, expected_tokens: int, now: float) -> str:
        snap = self.pool.snapshot(now)
        ids = [b.id for b in snap.backends if b.routable]
        loads = {b: snap.state(b).inflight for b in ids}
        hi, lo = max(loads.values()), min(loads.values())
        least = min(ids, key=lambda b: loads[b])  # first in worker order on a tie, as min_by_key
        if hi - lo > 64 and hi > 1.5 * lo:
            chosen, reason = least, "load_gate"
        else:
            depth = max(self.tree.match(info.block_hashes).values(), default=0)
            if depth > 0.3 * info.num_blocks:
                chosen, reason = self.first[info.block_hashes[depth - 1]], "prefix_hit"
            else:
                chosen, reason = least, "least_load"
        self.tree.record(chosen, info.block_hashes)
        for h in info.block_hashes:
            self.first.setdefault(h, chosen)
        self.reasons[reason] += 1
        self._cached[info.request_id] = 0
        self.pool.start(chosen, info.prompt_tokens, expected_tokens, cached_tokens=0)
        return chosen


class TrueCaches(SimRouter):
    """cache_aware deciding on each engine's true cache (its block pool), not on an index: the
    full knowledge of the present a router could at best get from KV events."""

    def __init__(self) -> None:
        super().__init__("cache_aware")
        self.engines: dict[str, SimEngine] = {}

    def add(self, engine: SimEngine) -> None:
        super().add(engine)
        self.engines[engine.id] = engine

    def route(self, info: RequestInfo, expected_tokens: int, now: float) -> str:
        snap = self.pool.snapshot(now)
        held = {b.id: len(self.engines[b.id].core.pool.lookup(info.block_hashes, info.num_blocks))
                for b in snap.backends}  # fmt: skip
        decision = self.core.policy.decide(snap, info, matches={b: n for b, n in held.items() if n})
        self.reasons[decision.reason] += 1
        cached = min(info.prompt_tokens, decision.matched_blocks * info.block_size)
        self._cached[info.request_id] = cached
        self.pool.start(decision.backend_id, info.prompt_tokens, expected_tokens, cached_tokens=cached)
        return decision.backend_id


PEERS: dict[str, Callable[[], SimRouter]] = {SGLANG: SglangModel, VLLM: VllmModel}
TRUE = "cache_aware (true caches)"
MODELS: dict[str, Callable[[], SimRouter]] = {**PEERS, TRUE: TrueCaches}
"""Rows routed by a model of a router rather than an infctl policy: the peers, and ``TRUE`` (by
``--policy``)."""


@dataclass(frozen=True)
class Outcome:
    hit: float
    p50_ms: float
    p99_ms: float
    balance: float
    """Busiest engine's uncached prompt tokens over the fair share."""
    decisions: Mapping[str, int]


def simulation(workload: str, policy: str, variant: int = 0) -> Simulation:
    config_policy: str | Mapping[str, Any] = json.loads(policy) if policy.lstrip().startswith("{") else policy
    cfg = config(workload, "round_robin" if policy in MODELS else config_policy, variant)
    sim = Simulation(cfg, prompt_source(build_workload(cfg.workload, cfg.api, cfg.seed)))
    if policy in MODELS:
        sim.router = MODELS[policy]()
    return sim


def run(workload: str, policy: str, variant: int = 0) -> Outcome:
    sim = simulation(workload, policy, variant)
    sim.run()
    res = build_result(sim.cfg, sim, "", "", 0.0)
    server, ttft = res.bench.server, res.bench.summary.ttft
    work = [e.prompt_tokens - e.prefix_hits for e in server.engines] if server else []
    share = max(work) * len(work) / sum(work) if sum(work) else float("nan")
    return Outcome(res.hit_rate or 0.0, ttft["p50"] * 1e3, ttft["p99"] * 1e3, share, dict(sim.router.reasons))


def requests_of(workload: str) -> tuple[list[RequestInfo], int]:
    """The requests ``workload`` sends, in arrival order (they do not depend on routing), and the blocks
    each engine holds."""
    sim = simulation(workload, "round_robin")
    seen: list[RequestInfo] = []
    route: Callable[[RequestInfo, int, float], str] = sim.router.route

    def recorded(info: RequestInfo, expected: int, now: float) -> str:
        seen.append(info)
        return route(info, expected, now)

    sim.router.route = recorded  # type: ignore[method-assign,assignment]
    sim.run()
    return seen, sim.cfg.profile.num_gpu_blocks


def ceiling_of(workload: str) -> Ceilings:
    """``infctl.router.ceiling``'s three ceilings for ``workload`` on these engines."""
    requests, blocks = requests_of(workload)
    return ceilings(requests, ENGINES, blocks)


def _med(xs: Sequence[float]) -> str:
    return f"{statistics.median(xs):.1f}"


def table(workload: str, policies: Sequence[str], variants: int) -> None:
    print(f"\n== {workload}: {ENGINES} engines on the virtual clock, {variants} variant(s) ==")
    ceiling = ceiling_of(workload)
    lru, best = ceiling.rates()["pooled_lru"], ceiling.rates()["pooled_min"]
    print(ceiling.describe())
    print(
        f"{'router':34s} {'hit %':>7s} {'/LRU':>5s} {'/MIN':>5s} {'TTFT p50':>9s} {'p99 ms':>8s} "
        f"{'max/fair':>8s}  decisions (1st run)"
    )
    for k, policy in enumerate(policies, 1):
        runs = [run(workload, policy, v) for v in range(variants)]
        hits = [r.hit * 100 for r in runs]
        p50s, p99s = [r.p50_ms for r in runs], [r.p99_ms for r in runs]
        label = policy if len(policy) <= 34 else f"#{k} (below)"
        reasons = ", ".join(f"{a} {b}" for a, b in sorted(runs[0].decisions.items()))
        hit = statistics.median(hits) / 100
        print(f"{label:34s} {_med(hits):>7s} {hit / lru:5.2f} {hit / best:5.2f} {_med(p50s):>9s} "
              f"{_med(p99s):>8s} {statistics.median(r.balance for r in runs):8.2f}  {reasons}",
              flush=True)  # fmt: skip
        if variants > 1:
            print(f"{'':34s} {min(hits):.1f}..{max(hits):.1f} {'':11s} {min(p50s):.0f}..{max(p50s):.0f} "
                  f"{min(p99s):.0f}..{max(p99s):.0f}")  # fmt: skip
        if label != policy:
            print(f"  #{k} = {policy}")


def explain(policy: str) -> None:
    """Where one Mooncake run's prompt blocks went (see the module docstring)."""
    sim = simulation("mooncake", policy)
    routed: list[tuple[float, RequestInfo, int, str, int, int]] = []
    route: Callable[[RequestInfo, int, float], str] = sim.router.route

    def watched(info: RequestInfo, expected: int, now: float) -> str:
        chosen = route(info, expected, now)
        held = [len(e.core.pool.lookup(info.block_hashes, info.num_blocks)) for e in sim.fleet.live()]
        there = len(sim.by_id[chosen].core.pool.lookup(info.block_hashes, info.num_blocks))
        routed.append((now, info, expected, chosen, there, max(held)))
        return chosen

    sim.router.route = watched  # type: ignore[method-assign,assignment]
    sim.run()
    cached = {f"sim-{r.index}": (r.cached_tokens or 0) // 16 for r in sim.records}
    model = FluidModel(prefill_tokens_per_s=1e6 / 17.25, tpot_s=0.006, cache_tokens=16384 * 16,
                       engine_cache=True)  # fmt: skip
    fleet = Fleet([Backend(e.id) for e in sim.fleet.live()], model)
    total = Counter[str]()
    sent: set[int] = set()
    for now, info, expected, chosen, there, best in routed:
        predicted = fleet.cached(info.block_hashes, now).get(chosen, 0)
        fleet.dispatch(TraceRequest(now, info, expected), chosen, "replayed")
        seen = next((i for i, h in enumerate(info.block_hashes) if h not in sent), info.num_blocks)
        sent.update(info.block_hashes)
        total.update(prompt=info.num_blocks, best=best, there=there, got=cached[info.request_id],
                     predicted=predicted, seen=seen, left=best > there)  # fmt: skip
    n = total["prompt"]
    print(f"\n== where the prompt blocks went: {policy}, Mooncake ({n} blocks) ==")
    rows = [
        ("sent before by an earlier request (the ceiling)", total["seen"]),
        ("held by the best-stocked engine at routing", total["best"]),
        ("held by the chosen engine at routing", total["there"]),
        ("reported cached by the chosen engine", total["got"]),
        ("predicted by the replay model, same decisions", total["predicted"]),
    ]
    for name, blocks in rows:
        print(f"  {name:48s} {blocks / n * 100:6.2f}%")
    print(
        f"  {total['left']} of {len(routed)} decisions chose an engine holding less than the best-stocked one"
    )
    print("misses by cause (points of prompt blocks):")
    causes = [
        ("first sight: no earlier request sent the block", n - total["seen"]),
        ("evicted from every engine before it came back", total["seen"] - total["best"]),
        ("routed away from an engine holding it", total["best"] - total["there"]),
        ("held at routing, not found when computed", total["there"] - total["got"]),
    ]
    for name, blocks in causes:
        print(f"  {name:48s} {blocks / n * 100:6.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=["shared", "mooncake"], action="append", help="run only these")
    ap.add_argument("--policy", action="append",
                    help=f"infctl policies (preset or JSON), or {TRUE!r}; repeatable")  # fmt: skip
    ap.add_argument("--variants", type=int, default=1, help="runs per row, scrape interval varied (noise)")
    ap.add_argument("--no-peer", action="store_true", help="leave out the peer routers' models")
    ap.add_argument("--explain", metavar="POLICY", help="account one Mooncake run's prompt blocks")
    args = ap.parse_args()
    if args.explain:
        explain(args.explain)
        return
    policies = [*(args.policy or ["round_robin", "cache_aware"]), *([] if args.no_peer else PEERS)]
    for workload in args.only or ["shared", "mooncake"]:
        table(workload, policies, args.variants)


if __name__ == "__main__":
    from saved import save_if_asked  # benchmarks/saved.py

    save_if_asked()  # --save PATH: this run's output, command, date and commit as a result record
    main()
