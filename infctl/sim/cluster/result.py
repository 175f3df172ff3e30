"""``SimResult``: an ``infctl bench`` result (same schema, so ``bench compare`` and reports read it) plus what
only a simulation knows: GPU-hours, replicas over time, scaling decisions, router decisions, run cost.

The saved JSON is ``BenchResult.to_dict()`` with one more top-level key, ``simulation``.
"""

from __future__ import annotations

import platform
import socket
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import infctl
from infctl.bench.config import BenchConfig
from infctl.bench.health import achieved_rate
from infctl.bench.metrics import summarize
from infctl.bench.result import BenchResult, ClientHealth, RunMetadata, StageResult
from infctl.bench.server_view import EngineView, ServerView
from infctl.bench.stats import describe
from infctl.sim.cluster.config import SimConfig
from infctl.sim.cluster.engine_loop import Simulation
from infctl.sim.cluster.scaling import ReplicaPoint, ScaleEvent

SIM_URL = "http://simulator.invalid"
"""Stands in for the server URL in the bench config (``.invalid`` is reserved: it names no host)."""


@dataclass
class SimResult:
    bench: BenchResult
    """The run in ``infctl bench``'s terms: latencies, throughput, goodput, hit rate, per-request records."""
    gpu_hours: float
    """GPU time of every engine from its ask to its stop (or the end of the run), hours."""
    replicas: list[ReplicaPoint]
    """The fleet over time: a point at the start and at every change."""
    scale_events: list[ScaleEvent]
    decisions: Mapping[str, int]
    """Routing decisions by reason."""
    sim_time_s: float
    """Virtual seconds simulated (first send to last completion)."""
    wall_s: float
    """Real seconds the simulation took."""
    steps: int
    """Engine steps run."""
    events: int
    """Events handled."""
    config: SimConfig = field(repr=False)
    pd: Mapping[str, Any] | None = None
    """PD runs: the layout, requests by the router's reason, and the decode legs' KV transfers by link."""
    admission: Mapping[str, Any] | None = None
    """Admission runs: requests held, released after a wait, and refused (429) by reason."""

    @property
    def refused(self) -> int:
        """Requests the admission queue answered 429 (full or past the deadline)."""
        return sum(self.admission["refused"].values()) if self.admission else 0

    @property
    def summary(self) -> Any:
        return self.bench.summary

    @property
    def hit_rate(self) -> float | None:
        """Prompt tokens served from the engines' prefix caches / prompt tokens looked up."""
        return self.bench.server.hit_rate if self.bench.server else None

    @property
    def peak_engines(self) -> int:
        return max((p.desired for p in self.replicas), default=self.config.engines)

    def to_dict(self, *, timeseries: bool = True) -> dict[str, Any]:
        out = self.bench.to_dict(timeseries=timeseries)
        cfg = self.config
        out["simulation"] = {
            "engines": cfg.engines,
            "profile": cfg.profile.name,
            "policy": cfg.policy if isinstance(cfg.policy, str) else dict(cfg.policy),
            "autoscale": None if cfg.autoscale is None else {
                "interval_s": cfg.autoscale.interval_s, "startup_s": cfg.autoscale.startup_s,
                "min": cfg.autoscale.policy.unit("both").min, "max": cfg.autoscale.policy.unit("both").max,
            },
            "scrape_interval_s": cfg.scrape_interval_s,
            "gpus_per_engine": cfg.gpus_per_engine,
            "gpu_hours": round(self.gpu_hours, 6),
            "peak_engines": self.peak_engines,
            "replicas": {
                "t": [round(p.t, 3) for p in self.replicas],
                "desired": [p.desired for p in self.replicas],
                "ready": [p.ready for p in self.replicas],
                "draining": [p.draining for p in self.replicas],
            },
            "scale_events": [
                {"t": round(e.t, 3), "from": e.current, "to": e.desired, "reason": e.reason}
                for e in self.scale_events
            ],
            "decisions": dict(self.decisions),
            "sim_time_s": round(self.sim_time_s, 6),
            "wall_s": round(self.wall_s, 3),
            "steps": self.steps,
            "events": self.events,
            "speedup": round(self.sim_time_s / self.wall_s, 3) if self.wall_s > 0 else None,
            "pd": None if self.pd is None else dict(self.pd),
            "admission": None if self.admission is None else dict(self.admission),
        }  # fmt: skip
        return out


def build_result(cfg: SimConfig, sim: Simulation, started: str, finished: str, wall_s: float) -> SimResult:
    # A lead-in's requests warm the fleet up and are not measured (``SimConfig.lead_in_stages``).
    records = sorted((r for r in sim.records if r.stage >= cfg.lead_in_stages), key=lambda r: r.index)
    summary = summarize(records, cfg.slo)
    stages = [
        StageResult(i, s.label, s.mean_rate, achieved_rate([r for r in records if r.stage == i]),
                    summarize([r for r in records if r.stage == i], cfg.slo))
        for i, s in enumerate(cfg.load.stages)
    ]  # fmt: skip
    warnings: list[str] = []
    if sim.too_long:
        warnings.append(
            f"{sim.too_long} requests exceed max_model_len {cfg.profile.max_model_len} of profile "
            f"{cfg.profile.name} and failed (HTTP 400); cap them with --max-input-tokens or pick a profile "
            "with a longer context"
        )
    if sim.traffic.exhausted and cfg.workload.kind not in ("trace", "sharegpt"):
        warnings.append(f"the workload ran out after {len(records)} requests")
    single = cfg.load.stages[0] if len(cfg.load.stages) == 1 else None
    client = ClientHealth(
        send_lag=describe(r.send_lag_s for r in records), loop_lag=describe(()), cpu_util=0.0,
        requested_rate=single.mean_rate if single else None, achieved_rate=achieved_rate(records),
    )  # fmt: skip
    server = ServerView(engines=[_engine_view(e) for e in sim.fleet.engines], samples=sim.scrapes)
    bench_cfg = BenchConfig(
        url=SIM_URL, model=cfg.profile.model, api=cfg.api, workload=cfg.workload, load=cfg.load,
        slo=cfg.slo, seed=cfg.seed, label=cfg.label,
    )  # fmt: skip
    n = cfg.engines
    meta = RunMetadata(
        label=cfg.label or f"simulate {n} x {cfg.profile.name}, {_policy_name(cfg)}",
        started_at=started, finished_at=finished, infctl_version=infctl.__version__, model=cfg.profile.model,
        url=f"simulate://{n}x{cfg.profile.name}", host=socket.gethostname(),
        python=f"{platform.python_implementation()} {sys.version.split()[0]}",
        interrupted=bool(sim.flights) or any(r.error == "timeout" for r in records),
        workload_exhausted=sim.traffic.exhausted,
    )  # fmt: skip
    bench = BenchResult(bench_cfg, meta, summary, stages, client, server, records, warnings)
    end = max(sim.end_time, sim.q.now)
    t0 = min((r.sent_s for r in records), default=0.0)
    start = cfg.measured_from_s
    events = sim.scaler.events if sim.scaler else []
    return SimResult(
        bench=bench, gpu_hours=sim.fleet.gpu_seconds(end, start) / 3600.0,
        replicas=_replicas_from(sim.replicas, start), scale_events=[e for e in events if e.t >= start],
        decisions=dict(sim.router.reasons),
        sim_time_s=sim.end_time - t0, wall_s=wall_s, steps=sim.steps, events=sim.events, config=cfg,
        pd=_pd_summary(cfg, sim), admission=_admission_summary(sim),
    )  # fmt: skip


def _replicas_from(points: list[ReplicaPoint], start: float) -> list[ReplicaPoint]:
    """The fleet from ``start`` on: the point in force then (moved to ``start``), and every later one."""
    if start <= 0:
        return points
    before = [p for p in points if p.t <= start]
    head = [ReplicaPoint(start, p.desired, p.ready, p.draining) for p in before[-1:]]
    return head + [p for p in points if p.t > start]


def _pd_summary(cfg: SimConfig, sim: Simulation) -> dict[str, Any] | None:
    layout = cfg.pd
    if layout is None:
        return None
    by_link: dict[str, int] = {}
    for prefill, decode, _ in sim.transfers:
        link = "intra_group" if sim.by_id[prefill].group == sim.by_id[decode].group else "cross_group"
        by_link[link] = by_link.get(link, 0) + 1
    reasons: dict[str, int] = {}
    for _, _, reason in sim.pairs.values():
        reasons[reason] = reasons.get(reason, 0) + 1
    return {
        "layout": f"{layout.groups}x{layout.prefill}P{layout.decode}D", "mode": layout.mode,
        "min_uncached_tokens": layout.min_uncached_tokens,
        "intra_group_gbps": layout.link_gbps(cfg.profile, "a", "a"),
        "cross_group_gbps": layout.link_gbps(cfg.profile, "a", "b"),
        "requests": reasons, "transfers": by_link,
    }  # fmt: skip


def _admission_summary(sim: Simulation) -> dict[str, Any] | None:
    room = sim.admission
    if room is None:
        return None
    s = room.settings
    return {
        "queue": s.queue, "deadline_s": s.deadline_s, "short_prompt_tokens": s.short_prompt_tokens,
        "held": room.held, "admitted_after_wait": room.admitted_after_wait, "refused": dict(room.refused),
    }  # fmt: skip


def _engine_view(e: Any) -> EngineView:
    s = e.core.stats()
    return EngineView(
        url=f"sim://{e.id}", engine="sim", prefix_queries=s.prefix_queries, prefix_hits=s.prefix_hits,
        preemptions=s.preemptions, prompt_tokens=s.prompt_tokens, generation_tokens=s.generation_tokens,
        queue_peak=e.queue_peak, running_peak=e.running_peak, kv_usage_peak=e.kv_usage_peak,
    )  # fmt: skip


def _policy_name(cfg: SimConfig) -> str:
    if isinstance(cfg.policy, str):
        return cfg.policy
    return str(cfg.policy.get("preset", "custom policy"))
