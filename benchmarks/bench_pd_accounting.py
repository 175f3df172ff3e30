"""How the router counts and pairs a disaggregated request, side by side on the virtual clock.

    python benchmarks/bench_pd_accounting.py [--engines 8 16] [--variants 5] [--requests 2000]
        [--arms ...] [--cross-group-cost 0.108] [--output json]

Runs ``infctl simulate compare pd``'s Group- and Pool-mode arms (1P1D groups, the Mooncake trace compressed
to load the prefill engines; latencies from its paced half) once per arm (decode-leg accounting, pairing):

- ``whole-prompt-queued`` (the live accounting, ``SimRouter`` as the proxy): the decode backend counts the
  whole prompt as queued prefill work until the first token, although its engine never prefills it;
- ``decode-leg``: the prompt's KV and the expected output are held there (``inflight_tokens``), nothing is
  queued as prefill (``pool.start`` with the whole prompt cached: the KV arrives from the prefill engine);
- ``cross-group-cost`` (the live pairing): the whole prompt queued, and ``PDSettings.cross_group_cost``
  (``--cross-group-cost``; the default 0.108) priced into a decode backend outside the prefill's group.
  The first two arms run link-blind (``cross_group_cost`` 0, the pairing before it existed). In Group mode
  every pair is inside one group, so the cost changes nothing there (a check that it does not).

A decode backend's queued tokens enter ``pick_pd`` only as the cost of a short prompt (uncached part up to
``min_uncached_tokens``) that the decode engine would prefill itself; long prompts pick their decode
backend by its in-flight context, which both accountings count alike. "cross" is the share of disaggregated
pairs whose KV crossed groups (Group mode: 0). "local beside due" is the share of
those short local prefills sent to a decode backend where a disaggregated request's first token was still
due (its prefill leg or KV transfer in flight): the whole-prompt count steers them away from such backends.
Either way the prefill leg counts on its prefill backend (``start_prefill_leg``) and the pairing is the live
``RouterCore.route_pd``. A trace has no seed to vary (``--seed`` changes nothing on it), and one different
early decision reshuffles every queue after it, so each configuration runs ``--variants`` times with the
router's scrape interval at 100 ms x (1, 0.93, 1.07, 0.86, 1.14, ...), as ``bench_router_sim.py`` does:
medians with min..max under them, and in how many variants the second accounting was no worse. Pure CPU,
deterministic, no lock needed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from infctl.bench.workloads import build_workload
from infctl.router.policies.pd import PDDecision, PDSettings
from infctl.router.snapshot import RequestInfo
from infctl.sim.cluster import variant_scrape_interval
from infctl.sim.cluster.engine_loop import Simulation
from infctl.sim.cluster.prompts import prompt_source
from infctl.sim.cluster.result import build_result
from infctl.sim.cluster.routing import SimRouter
from infctl.sim.cluster.scenarios import SCENARIOS, ScenarioSize
from infctl.sim.cluster.scenarios import measures as m


class Watched(SimRouter):
    """The live accounting (``SimRouter``: the decode backend queues the whole prompt until the first token),
    counting how many requests the decode backends prefill themselves while a disaggregated request's first
    token is still due there (its prefill leg or KV transfer in flight)."""

    def __init__(self, policy: str | Mapping[str, Any], pools: Sequence[str | None] = ()) -> None:
        super().__init__(policy, pools)
        self.cross_group_cost: float | None = None
        """``PDSettings.cross_group_cost`` for this arm; None: the layout's (the router's default)."""
        self.due: dict[str, set[str]] = {}
        """Decode backend -> disaggregated requests whose first token is still due there."""
        self.local = self.local_beside_due = 0
        self.pairs = self.cross = 0
        """Disaggregated pairs, and those whose KV crossed groups."""

    def route_pd(self, info: RequestInfo, expected_tokens: int, now: float, pd: PDSettings) -> PDDecision:
        if self.cross_group_cost is not None:
            pd = dataclasses.replace(pd, cross_group_cost=self.cross_group_cost)
        decision = self._route_pd(info, expected_tokens, now, pd)
        due = self.due.setdefault(decision.decode, set())
        if decision.prefill is not None:
            due.add(info.request_id)
            self.pairs += 1
            self.cross += self.pool.backend(decision.prefill).group != decision.group
        else:
            self.local += 1
            self.local_beside_due += bool(due)
        return decision

    def _route_pd(self, info: RequestInfo, expected_tokens: int, now: float, pd: PDSettings) -> PDDecision:
        return super().route_pd(info, expected_tokens, now, pd)

    def first_token(self, backend_id: str, prompt_tokens: int, request_id: str) -> None:
        self.due.get(backend_id, set()).discard(request_id)
        super().first_token(backend_id, prompt_tokens, request_id)

    def finish(
        self, backend_id: str, prompt_tokens: int, expected_tokens: int, request_id: str, *, got_first: bool
    ) -> None:
        self.due.get(backend_id, set()).discard(request_id)
        super().finish(backend_id, prompt_tokens, expected_tokens, request_id, got_first=got_first)


class DecodeLegRouter(Watched):
    """The candidate: a disaggregated request's decode backend holds its KV but queues none of its prompt as
    prefill work (the engine never prefills it); ``pool.start`` with the whole prompt cached."""

    def _route_pd(self, info: RequestInfo, expected_tokens: int, now: float, pd: PDSettings) -> PDDecision:
        decision = self.core.route_pd(self.pool.snapshot(now), info, pd)
        self.reasons[decision.reason] += 1
        cached = info.prompt_tokens if decision.prefill is not None else 0
        self._cached[info.request_id] = cached
        self.pool.start(decision.decode, info.prompt_tokens, expected_tokens, cached_tokens=cached)
        if decision.prefill is not None:
            self.pool.start_prefill_leg(decision.prefill, info.prompt_tokens)
        return decision


LINK_AWARE = "cross-group-cost"
ARMS: dict[str, tuple[type[Watched], float | None]] = {
    "whole-prompt-queued": (Watched, 0.0),
    "decode-leg": (DecodeLegRouter, 0.0),
    LINK_AWARE: (Watched, None),
}
"""Label -> (router, ``cross_group_cost``: None = ``--cross-group-cost``); the first is the baseline (the
link-blind live accounting) the others are compared with."""


@dataclass(frozen=True)
class Run:
    ttft_p50_ms: float
    ttft_p99_ms: float
    tpot_p99_ms: float
    tput: float
    """Output tokens/s in the closed-loop half."""
    beside_due: float
    """Share of the requests decode backends prefilled themselves that landed beside a due first token."""
    cross: float
    """Share of the disaggregated pairs whose prefill and decode backends are in different groups."""


def run(
    engines: int, requests: int, mode: str, variant: int, router: type[Watched], cross_group_cost: float
) -> Run:
    scenario = SCENARIOS["pd"](ScenarioSize(engines=engines, requests=requests))
    arm = next(a for a in scenario.arms if "pd" in a.changes and a.changes["pd"].mode == mode)
    cfg = dataclasses.replace(arm.config(scenario.base), scrape_interval_s=variant_scrape_interval(variant))
    sim = Simulation(cfg, prompt_source(build_workload(cfg.workload, cfg.api, cfg.seed)))
    watched = sim.router = router(cfg.policy, cfg.pools)
    watched.cross_group_cost = cross_group_cost
    sim.run()
    res = build_result(cfg, sim, "", "", 0.0)

    def ms(reader: m.Reader) -> float:
        v = reader(res)
        return float("nan") if v is None else v * 1e3

    tput = m.output_throughput(m.SATURATED)(res)
    return Run(ms(m.ttft("p50", m.PACED)), ms(m.ttft("p99", m.PACED)), ms(m.tpot("p99", m.PACED)),
               float("nan") if tput is None else tput,
               watched.local_beside_due / watched.local if watched.local else 0.0,
               watched.cross / watched.pairs if watched.pairs else 0.0)  # fmt: skip


def _spread(xs: Sequence[float]) -> str:
    return f"{statistics.median(xs):7.1f} ({min(xs):.0f}..{max(xs):.0f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engines", type=int, nargs="+", default=[8], help="fleet sizes (even; default 8)")
    ap.add_argument("--variants", type=int, default=5, help="scrape-interval variants per configuration")
    ap.add_argument("--requests", type=int, default=2000, help="trace requests per run (half paced)")
    ap.add_argument("--modes", nargs="+", default=["group", "pool"], choices=["group", "pool"])
    ap.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS),
                    help="arms to run, the first is the baseline (default: all three)")  # fmt: skip
    ap.add_argument("--cross-group-cost", type=float, default=PDSettings().cross_group_cost,
                    help=f"the {LINK_AWARE!r} arm's PDSettings.cross_group_cost (prefill tokens per "
                    "transferred token; default: the router's)")  # fmt: skip
    ap.add_argument("--output", choices=["table", "json"], default="table")
    args = ap.parse_args()
    arms: dict[str, tuple[type[Watched], float]] = {}
    for key in args.arms:
        cls, cost = ARMS[key]
        arms[key] = (cls, args.cross_group_cost if cost is None else cost)
    out: list[dict[str, object]] = []
    for engines in args.engines:
        for mode in args.modes:
            runs = {
                label: [run(engines, args.requests, mode, v, cls, cost) for v in range(args.variants)]
                for label, (cls, cost) in arms.items()
            }
            figures = {k: [dataclasses.asdict(r) for r in v] for k, v in runs.items()}
            costs = {k: cost for k, (_, cost) in arms.items()}
            out.append({"engines": engines, "mode": mode, "cross_group_cost": costs, "runs": figures})
            if args.output == "table":
                _print(engines, mode, runs)
    if args.output == "json":
        print(json.dumps(out, indent=1))


def _print(engines: int, mode: str, runs: dict[str, list[Run]]) -> None:
    print(f"\n== PD {mode} mode, {engines // 2} x 1P1D, {len(next(iter(runs.values())))} variant(s): "
          "medians (min..max) ==")  # fmt: skip
    print(f"{'arm':22s} {'TTFT p50 ms':>20s} {'TTFT p99 ms':>20s} {'TPOT p99':>9s} "
          f"{'tok/s':>7s} {'local beside due':>16s} {'cross':>6s}")  # fmt: skip
    base = next(iter(runs.values()))
    for label, rs in runs.items():
        p50, p99 = [r.ttft_p50_ms for r in rs], [r.ttft_p99_ms for r in rs]
        tpot = statistics.median(r.tpot_p99_ms for r in rs)
        print(f"{label:22s} {_spread(p50):>20s} {_spread(p99):>20s} {tpot:9.2f} "
              f"{statistics.median(r.tput for r in rs):7.0f} "
              f"{statistics.median(r.beside_due for r in rs) * 100:15.0f}% "
              f"{statistics.median(r.cross for r in rs) * 100:5.0f}%")  # fmt: skip
        if rs is not base:
            r50 = statistics.median(p50) / statistics.median(r.ttft_p50_ms for r in base)
            r99 = statistics.median(p99) / statistics.median(r.ttft_p99_ms for r in base)
            w50 = sum(a.ttft_p50_ms <= b.ttft_p50_ms for a, b in zip(rs, base, strict=True))
            w99 = sum(a.ttft_p99_ms <= b.ttft_p99_ms for a, b in zip(rs, base, strict=True))
            print(f"{'':22s} vs baseline: p50 x{r50:.3f} (no worse in {w50}/{len(rs)}), "
                  f"p99 x{r99:.3f} (no worse in {w99}/{len(rs)})")  # fmt: skip


if __name__ == "__main__":
    from saved import save_if_asked  # benchmarks/saved.py

    save_if_asked()  # --save PATH: this run's output, command, date and commit as a result record
    main()
