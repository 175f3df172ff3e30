"""simulate() with a PD layout and with admission control: small runs asserting behaviour."""

from __future__ import annotations

from collections import Counter

import pytest

from infctl.bench.config import LoadPlan, Stage
from infctl.bench.workloads import LengthDist, RandomSpec, SharedPrefixSpec, build_workload
from infctl.router.core import RouterCore
from infctl.router.policies.pd import PDDecision, PDSettings
from infctl.router.snapshot import RequestInfo, Snapshot
from infctl.sim.cluster import SimConfig, simulate
from infctl.sim.cluster.admission import AdmissionSettings
from infctl.sim.cluster.engine_loop import Simulation
from infctl.sim.cluster.pd import PDLayout, transfer_seconds
from infctl.sim.cluster.prompts import prompt_source
from infctl.sim.profiles import get_profile

LLAMA = get_profile("llama3-8b-h100")


def _random(prompt: int, output: int = 16) -> RandomSpec:
    return RandomSpec(input=LengthDist(mean=prompt), output=LengthDist(mean=output))


def _cfg(layout: PDLayout, *, prompt: int = 2000, n: int = 60, rate: float = 20.0, **kw: object) -> SimConfig:
    return SimConfig(workload=_random(prompt), load=LoadPlan(stages=[Stage(rate=rate, num_requests=n)]),
                     engines=layout.size, pd=layout, **kw)  # type: ignore[arg-type]  # fmt: skip


def _sim(cfg: SimConfig) -> Simulation:
    return Simulation(cfg, prompt_source(build_workload(cfg.workload, cfg.api, cfg.seed)))


def test_ttft_is_prefill_plus_transfer_plus_first_decode_step() -> None:
    cfg = SimConfig(workload=_random(2000, 4), load=LoadPlan(stages=[Stage(concurrency=1, num_requests=3)]),
                    engines=2, pd=PDLayout())  # fmt: skip
    r = simulate(cfg)
    prefill = LLAMA.step_time(2000, 0, 0)
    transfer = transfer_seconds(2000, LLAMA.kv_bytes_per_token, LLAMA.kv_transfer_gbps)
    first_decode = LLAMA.step_time(0, 1, 2000)
    assert r.summary.completed == 3
    for rec in r.bench.requests:
        assert rec.input_tokens == 2000
        assert rec.chunk_times[0] - rec.sent_s == pytest.approx(prefill + transfer + first_decode, rel=1e-9)


def test_disaggregated_requests_occupy_both_engines_of_one_group() -> None:
    sim = _sim(_cfg(PDLayout(1, 1, groups=3, mode="group")))
    sim.run()
    assert len(sim.records) == 60 and all(rec.ok for rec in sim.records)
    assert {reason for _, _, reason in sim.pairs.values()} == {"disaggregated"}
    by_id = sim.by_id
    for prefill, decode, _ in sim.pairs.values():
        assert prefill is not None and by_id[prefill].role == "prefill" and by_id[decode].role == "decode"
        assert by_id[prefill].group == by_id[decode].group  # group mode never pairs across groups
    for e in sim.fleet.engines:
        s = e.core.stats()
        if e.role == "prefill":  # computed every prompt, generated one token per request (the prefill leg)
            assert s.prompt_tokens > 0 and s.generation_tokens * 2000 == s.prompt_tokens
        else:  # held the KV (it showed in scrapes) and generated the answers
            assert e.kv_usage_peak > 0 and s.generation_tokens > 0
    assert sum(e.core.stats().generation_tokens for e in sim.fleet.engines if e.role == "decode") == 60 * 16
    assert {e.id for e in sim.fleet.engines if e.role == "prefill"} == {p for p, _, _ in sim.pairs.values()}


def test_pool_mode_pairs_across_groups_over_the_slower_link() -> None:
    r = simulate(_cfg(PDLayout(1, 1, groups=3, mode="pool"), rate=40))
    assert r.pd is not None and r.pd["mode"] == "pool"
    assert r.pd["transfers"].get("cross_group", 0) > 0
    assert r.pd["cross_group_gbps"] < r.pd["intra_group_gbps"]
    grouped = simulate(_cfg(PDLayout(1, 1, groups=3, mode="group"), rate=40))
    assert grouped.pd is not None and set(grouped.pd["transfers"]) == {"intra_group"}


def test_short_uncached_prompts_run_on_the_decode_engine() -> None:
    sim = _sim(_cfg(PDLayout(1, 1, groups=2, min_uncached_tokens=512), prompt=300))
    sim.run()
    assert all(rec.ok for rec in sim.records) and len(sim.records) == 60
    assert {(p, reason) for p, _, reason in sim.pairs.values()} == {(None, "local_prefill")}
    assert not sim.transfers
    assert all(e.core.stats().prompt_tokens == 0 for e in sim.fleet.engines if e.role == "prefill")


def test_decode_engines_only_take_what_their_kv_holds() -> None:
    # 400 blocks of 16 tokens: a 2,000-token prompt takes 126, so a decode engine holds at most 3.
    small = LLAMA.with_overrides(num_gpu_blocks=400)
    sim = _sim(_cfg(PDLayout(2, 1), rate=200, n=30, profile=small))
    sim.run()
    assert len(sim.records) == 30 and all(rec.ok for rec in sim.records)
    decode = sim.by_id["g0-d0"]
    assert 0 < decode.running_peak <= 3
    assert decode.kv_usage_peak <= 1.0


class RecordingCore(RouterCore):
    """The live RouterCore, noting every PD decision it returns."""

    decisions: list[tuple[str, PDDecision]]

    def route_pd(self, snapshot: Snapshot, request: RequestInfo, pd: PDSettings | None = None) -> PDDecision:
        decision = super().route_pd(snapshot, request, pd)
        self.decisions.append((request.request_id, decision))
        return decision


def test_the_pairs_are_the_live_routers_decisions() -> None:
    workload = SharedPrefixSpec(groups=6, prefix_tokens=1536, input=LengthDist(mean=256),
                                output=LengthDist(mean=16))  # fmt: skip
    cfg = SimConfig(workload=workload, load=LoadPlan(stages=[Stage(rate=30, num_requests=80)]), engines=6,
                    pd=PDLayout(1, 1, groups=3, mode="pool"))  # fmt: skip
    sim = _sim(cfg)
    core = RecordingCore(sim.router.core.policy)
    core.decisions = []
    sim.router.core = core
    sim.run()
    assert len(core.decisions) == 80
    assert {rid: (d.prefill, d.decode, d.reason) for rid, d in core.decisions} == sim.pairs
    # Shared prefixes cached on a decode engine make some requests short enough to run there.
    assert Counter(d.reason for _, d in core.decisions).keys() >= {"disaggregated"}


def test_admission_holds_then_refuses_when_saturated() -> None:
    tight = LLAMA.with_overrides(max_num_seqs=2)
    cfg = SimConfig(workload=_random(1000, 64), load=LoadPlan(stages=[Stage(rate=200, num_requests=120)]),
                    engines=1, profile=tight, scrape_interval_s=0.05,
                    admission=AdmissionSettings(queue=8, deadline_s=2.0))  # fmt: skip
    r = simulate(cfg)
    adm = r.admission
    assert adm is not None
    refused = [rec for rec in r.bench.requests if rec.status == 429]
    assert adm["held"] > 0 and adm["admitted_after_wait"] > 0
    assert adm["refused"].get("admission_full", 0) > 0 and adm["refused"].get("admission_deadline", 0) > 0
    assert len(refused) == r.refused == sum(adm["refused"].values())
    assert len(r.bench.requests) == 120
    assert all(rec.ok for rec in r.bench.requests if rec.status != 429)
    deadline = [rec for rec in refused if "admission_deadline" in rec.error_detail]
    assert all(rec.end_s - rec.sent_s == pytest.approx(2.0 + 0.001) for rec in deadline)
    assert r.to_dict()["simulation"]["admission"]["refused"] == adm["refused"]


def test_without_admission_every_request_is_routed_at_once() -> None:
    tight = LLAMA.with_overrides(max_num_seqs=2)
    cfg = SimConfig(workload=_random(1000, 64), load=LoadPlan(stages=[Stage(rate=200, num_requests=60)]),
                    engines=1, profile=tight)  # fmt: skip
    r = simulate(cfg)
    assert r.admission is None and r.refused == 0 and r.summary.completed == 60


def test_prefill_legs_count_in_flight_on_their_prefill_backend_until_they_end() -> None:
    # As the live proxy: without it, a burst between two scrapes sees every prefill engine idle.
    sim = _sim(_cfg(PDLayout(2, 1, groups=1, mode="group"), n=20, rate=200.0))
    router, pool = sim.router, sim.router.pool
    seen: list[int] = []
    done = router.prefill_done

    def spy(backend_id: str, prompt_tokens: int) -> None:
        seen.append(pool.inflight(backend_id))
        done(backend_id, prompt_tokens)

    router.prefill_done = spy  # type: ignore[method-assign]
    sim.run()
    assert len(seen) == 20 and min(seen) >= 1 and max(seen) > 1  # a burst overlaps on a prefill engine
    assert all(pool.inflight(b) == 0 for b in pool.ids())


def test_a_pd_run_leaves_nothing_in_flight_on_any_backend() -> None:
    sim = _sim(_cfg(PDLayout(2, 2, groups=1, mode="pool"), n=40, rate=200.0))
    sim.run()
    assert sum(1 for _, (p, _, _) in sim.pairs.items() if p is not None) > 0
    assert all(sim.router.pool.inflight(b) == 0 for b in sim.router.pool.ids())


def test_a_decode_backend_counts_a_disaggregated_prompt_as_queued_until_its_first_token() -> None:
    # As the live proxy. The decode engine never prefills it, but counting it keeps short local prefills off
    # decode backends with a first token due; counting it as cached lost TTFT p50 in Pool mode
    # (benchmarks/bench_pd_accounting.py).
    sim = _sim(_cfg(PDLayout(1, 1, groups=2, mode="pool"), n=20, rate=100.0))
    router, pool = sim.router, sim.router.pool
    released: list[tuple[str | None, float, int]] = []
    first = router.first_token

    def spy(backend_id: str, prompt_tokens: int, request_id: str) -> None:
        before = pool.snapshot(0.0).states[backend_id].queued_tokens
        first(backend_id, prompt_tokens, request_id)
        after = pool.snapshot(0.0).states[backend_id].queued_tokens
        released.append((sim.pairs[request_id][0], before - after, prompt_tokens))

    router.first_token = spy  # type: ignore[method-assign]
    sim.run()
    disaggregated = [(gone, prompt) for prefill, gone, prompt in released if prefill is not None]
    assert len(disaggregated) == 20
    assert all(gone == prompt for gone, prompt in disaggregated)
