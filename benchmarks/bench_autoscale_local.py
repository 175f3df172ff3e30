"""A compressed day on the local target: a static fleet for the peak vs the autoscaled fleet, live and on the
virtual clock, side by side.

    flock /tmp/infctl-bench.lock python benchmarks/bench_autoscale_local.py [--day business] [--minutes 3]
                                                                           [--engines 4] [--zero]

The day is ``infctl simulate compare autoscaling``'s own (:func:`~infctl.sim.cluster.scenarios.autoscaling.
autoscaling_day`): the day's hourly shape as ramps, Mooncake trace requests, a TTFT SLO of 2 s, a static
fleet of ``--engines`` sized for the peak (~60% of its prefill capacity there) and infctl's policy (the
reactive queue/KV/TTFT policy plus its forecast) between 1 and that, every timing (decision interval,
windows, cooldowns, the forecast's lead) shrunk with the day as there. Only the day's length and the engine
profile differ: it lasts ``--minutes`` of wall time, on Llama-3-8B-on-H100 engines (``--sim-profile``), so a
machine can run it. ``--zero`` runs the ``scale-to-zero`` comparison's day instead (a night with no
traffic), adding infctl's policy allowed to 0 (``min`` 0, ``scale_to_zero_after_s``; the router holds the
first morning request while an engine starts). Its idle window is 15 minutes scaled by the same floor as
every timing (1/15: 60 s), so the night (5/24 of the day) outlasts it only on days of 5 minutes or more:
``--zero --minutes 10`` (three arms, ~32 minutes) leaves half the night at zero; shorter days say so.

The default run (3-minute business day, two arms, then ~10 s on the virtual clock) takes about 7 minutes.

Each arm runs live, one after the other: ``infctl.local``'s supervisor starts the arm's first engines
(``infctl sim``, one process each, in real time) and ``infctl router`` in front of them, exactly as
``infctl deploy --target local`` would; the autoscaled arm runs the autoscaler daemon
(:func:`infctl.autoscaler.daemon.serve`) in this process with the comparison's policy, acting on the
supervisor's control endpoint (``PUT /scale/both``: engines start from the reserve, register with the
router, and drain before they stop). The benchmark client sends the day's requests through the router.
Engine-seconds are the supervisor's ready, starting and stopping engines (``GET /scale``, sampled four times
a second) integrated over the day: an engine costs from its ask to its stop, as GPU-hours do in the
simulator. The same arms then run on the virtual clock (``infctl.sim.cluster``): the policy alone, with no
host in the way. An engine the autoscaler adds starts in the day's scaled start-up (6 s of a 3-minute day)
on the virtual clock; live it sleeps that long before ``infctl sim`` starts, which then takes its own second
or so (the mean start-up is shown).

The client, router, engines and autoscaler share this machine's cores: a loaded host adds TTFT to the live
arms that the virtual clock does not have.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
import yaml

from infctl.autoscaler.daemon import AutoscalerConfig
from infctl.autoscaler.daemon import serve as serve_autoscaler
from infctl.autoscaler.local import LocalActuator
from infctl.autoscaler.settings import PolicyConfig
from infctl.autoscaler.snapshot import Decision, ScalingSnapshot
from infctl.bench.config import BenchConfig
from infctl.bench.fleet_time import (
    FleetSample,
    engine_seconds,
    fleet_sample,
    mean_start_up,
    peak_held,
    plan_seconds,
    wall_plan,
)
from infctl.bench.result import BenchResult
from infctl.bench.run import run_benchmark
from infctl.bench.slo import SLO
from infctl.config import load_deployment
from infctl.config.router import ADMIN_TOKEN_ENV
from infctl.local import LocalPlan, SupervisorSettings, build_plan, port_is_free, serve
from infctl.local.admin_token import token_path
from infctl.local.plan import router_specs
from infctl.sim.cluster import SimConfig, simulate
from infctl.sim.cluster.admission import AdmissionSettings
from infctl.sim.cluster.result import SimResult
from infctl.sim.cluster.scenarios.autoscaling import TRACE_PROMPT_TOKENS, autoscaling_day
from infctl.sim.cluster.scenarios.catalog import ScenarioSize, paced_rate
from infctl.sim.cluster.scenarios.diurnal import mean_level
from infctl.sim.cluster.scenarios.model import SimArm, SimScenario
from infctl.sim.cluster.scenarios.zero import DAY as NIGHT
from infctl.sim.cluster.scenarios.zero import scale_to_zero
from infctl.sim.profiles import get_profile

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
SAMPLE_S = 0.25
"""How often the supervisor's fleet is sampled (wall seconds)."""


@dataclass(frozen=True)
class Figures:
    """One arm's measures, in simulated seconds."""

    engine_s: float
    slo: float | None
    ttft_p50: float | None
    ttft_p99: float | None
    ttft_max: float | None
    failed: int
    peak: int
    fewest: int


@dataclass(frozen=True)
class LiveArm:
    label: str
    bench: BenchResult
    samples: tuple[FleetSample, ...]
    start: float
    end: float
    changes: int
    """Scale decisions the daemon applied (0 for the static fleet)."""


def quiet_seconds(sc: SimScenario) -> float:
    """Simulated seconds of the day without traffic (the night of the scale-to-zero day)."""
    return sum(s.duration_s or 0.0 for s in sc.base.load.stages if (s.rate or 0) < 1e-6 and not s.rate_end)


def idle_window(sc: SimScenario) -> float | None:
    """The shortest scale-to-zero window of the scenario's arms, simulated seconds (None: no arm has one)."""
    windows = [
        u.scale_to_zero_after_s
        for a in sc.arms
        if (auto := a.changes.get("autoscale")) is not None
        for u in auto.policy.units
        if u.scale_to_zero_after_s is not None
    ]
    return min(windows) if windows else None


def day_scenario(args: argparse.Namespace) -> SimScenario:
    """The comparison's day sized to last ``args.minutes`` of wall time: its static arm and infctl's arms
    (the reactive and KEDA-style arms are left to ``infctl simulate compare``)."""
    profile = get_profile(args.sim_profile)
    day = NIGHT if args.zero else args.day
    day_s = args.minutes * 60 * args.speedup
    peak = paced_rate(args.engines, profile, TRACE_PROMPT_TOKENS)
    requests = max(20, round(day_s * peak * mean_level(day)))
    size = ScenarioSize(engines=2 * args.engines, requests=requests, seed=args.seed, profile=profile)
    sc = scale_to_zero(size) if args.zero else autoscaling_day(day, size)
    arms = [sc.arms[0], *(a for a in sc.arms[1:] if a.label.startswith("infctl"))]
    return replace(sc, arms=arms)


def profile_text(base: SimConfig, arm: SimArm, args: argparse.Namespace, run_dir: Path) -> str:
    """The local deployment profile of one arm: its first engines, the reserve up to its maximum."""
    autoscale = arm.changes.get("autoscale")
    start = int(arm.changes.get("engines", base.engines))
    most = autoscale.policy.unit("both").max if autoscale is not None else base.engines
    data: dict[str, Any] = {
        "name": "autoscale-local",
        "target": "local",
        "mode": "aggregated",
        "replicas": start,
        "model": {
            "engine": "vllm",
            "model": MODEL,
            "served_model_name": "llama3-8b",
            "enable_prefix_caching": True,
            "max_model_len": base.profile.max_model_len,
            "sim": {"profile": base.profile.name, "speedup": args.speedup},
        },
        "router": {"enabled": True, "policy": base.policy, "port": args.base_port + 90},
        # The reserve and the control endpoint; the daemon runs in this process with the arm's policy.
        "autoscaler": {"enabled": True, "both": {"min": 1, "max": max(start, most)}},
        "local": {"base_port": args.base_port, "run_dir": str(run_dir), "simulate": True},
    }
    return yaml.safe_dump(data, sort_keys=False)


def router_flags(admission: AdmissionSettings | None, speedup: float) -> list[str]:
    """The live router's admission flags for the arm's simulated admission (None: routed on arrival)."""
    if admission is None:
        return ["--admission-queue", "0"]
    return [
        "--admission-queue", str(admission.queue),
        "--admission-deadline", f"{admission.deadline_s / speedup:g}s",
        "--hold-when-empty", f"{admission.hold_when_empty_s / speedup:g}s",
        "--short-prompt-tokens", str(admission.short_prompt_tokens),
    ]  # fmt: skip


def with_router_flags(plan: LocalPlan, flags: Sequence[str]) -> LocalPlan:
    specs = tuple(replace(s, argv=(*s.argv, *flags)) if s.kind == "router" else s for s in plan.specs)
    return replace(plan, specs=specs)


def with_start_up(plan: LocalPlan, seconds: float) -> LocalPlan:
    """``plan`` whose reserve engines (those the autoscaler adds) wait ``seconds`` before ``infctl sim``
    starts, as an engine loads weights and warms up: the day's start-up, which the virtual clock gives
    every engine it adds. The supervisor counts them starting (GPU time) from the ask."""
    wait = ("sh", "-c", f'sleep {seconds:g} && exec "$0" "$@"')
    return replace(plan, reserve=tuple(replace(s, argv=(*wait, *s.argv)) for s in plan.reserve))


async def run_live(sc: SimScenario, arm: SimArm, args: argparse.Namespace) -> LiveArm:
    base, speedup = sc.base, args.speedup
    autoscale = arm.changes.get("autoscale")
    with tempfile.TemporaryDirectory(prefix="bench-autoscale-") as tmp:
        path = Path(tmp) / "profile.yaml"
        path.write_text(profile_text(base, arm, args, Path(tmp)))
        profile = load_deployment(path)
        plan = build_plan(profile, is_free=port_is_free, daemons=(router_specs,))
        plan = with_router_flags(plan, router_flags(arm.changes.get("admission"), speedup))
        if autoscale is not None:
            plan = with_start_up(plan, autoscale.startup_s / speedup)
        control = f"http://127.0.0.1:{plan.control_port}"
        ready, stop = asyncio.Event(), asyncio.Event()
        settings = SupervisorSettings(health_timeout=120, grace_period=5, drain_timeout=60)
        supervisor = asyncio.create_task(serve(plan, settings, ready=ready, stop=stop))
        samples: list[FleetSample] = []
        changes = 0

        def on_decision(decision: Decision, snap: ScalingSnapshot) -> None:
            nonlocal changes
            changes += sum(r.changed for r in decision.recommendations)

        tasks: list[asyncio.Task[None]] = []
        try:
            up = time.monotonic()
            await asyncio.wait_for(ready.wait(), 180)
            print(
                f"  {arm.label}: {len(plan.specs) - 1} engines and the router up in "
                f"{time.monotonic() - up:.0f} s"
            )
            async with httpx.AsyncClient(timeout=5.0, trust_env=False) as http:
                tasks.append(asyncio.create_task(_sample(http, control, samples, stop)))
                if autoscale is not None:
                    assert isinstance(autoscale.policy, PolicyConfig), "infctl's arms run PolicyConfig"
                    # With no engine left it reads the router's admin API, as the supervised daemon does.
                    os.environ[ADMIN_TOKEN_ENV] = token_path(plan).read_text().strip()
                    cfg = AutoscalerConfig(
                        policy=autoscale.policy.scaled(1 / speedup),
                        interval_s=autoscale.interval_s / speedup,
                        router_url=plan.entrypoint.url,
                        port=None,
                    )
                    actuator = LocalActuator(http, control)
                    tasks.append(
                        asyncio.create_task(
                            serve_autoscaler(cfg, actuator, stop=stop, on_decision=on_decision)
                        )
                    )
                bench = BenchConfig(
                    url=plan.entrypoint.url,
                    model=plan.model,
                    workload=base.workload,
                    load=wall_plan(base.load, speedup),
                    slo=SLO(ttft_s=base.slo.ttft_s / speedup) if base.slo and base.slo.ttft_s else None,
                    seed=base.seed,
                    api=base.api,
                    label=arm.label,
                    progress_interval_s=20.0,
                )
                start = time.monotonic()
                result = await run_benchmark(bench, progress=lambda p: _progress(arm.label, p, samples))
                end = time.monotonic()
                stop.set()
                await asyncio.gather(*tasks)
        finally:
            stop.set()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, supervisor, return_exceptions=True)
    return LiveArm(arm.label, result, tuple(samples), start, end, changes)


async def _sample(http: httpx.AsyncClient, control: str, out: list[FleetSample], stop: asyncio.Event) -> None:
    while not stop.is_set():
        try:
            resp = await http.get(f"{control}/scale")
            out.append(fleet_sample(time.monotonic(), resp.json()))
        except (httpx.HTTPError, ValueError, KeyError):
            pass  # the supervisor is busy starting an engine: the next sample will do
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), SAMPLE_S)


def _progress(label: str, p: Any, samples: Sequence[FleetSample]) -> None:
    fleet = samples[-1] if samples else None
    engines = "" if fleet is None else f", engines {fleet.ready} ready + {fleet.starting} starting"
    print(
        f"  {label}: {p.elapsed_s:4.0f} s, sent {p.sent}, done {p.completed}, failed {p.failed}{engines}",
        flush=True,
    )


def live_figures(arm: LiveArm, speedup: float) -> Figures:
    s = arm.bench.summary
    ttft = s.ttft

    def sim(v: float | None) -> float | None:
        return None if v is None or not ttft.count else v * speedup

    return Figures(
        engine_s=engine_seconds(arm.samples, arm.start, arm.end) * speedup,
        slo=s.good_fraction,
        ttft_p50=sim(ttft["p50"] if ttft.count else None),
        ttft_p99=sim(ttft["p99"] if ttft.count else None),
        ttft_max=sim(ttft["max"] if ttft.count else None),
        failed=s.failed,
        peak=peak_held(arm.samples),
        fewest=min((x.held for x in arm.samples), default=0),
    )


def virtual_figures(r: SimResult) -> Figures:
    s = r.bench.summary
    return Figures(
        engine_s=r.gpu_hours * 3600 / r.config.gpus_per_engine,
        slo=s.good_fraction,
        ttft_p50=s.ttft["p50"] if s.ttft.count else None,
        ttft_p99=s.ttft["p99"] if s.ttft.count else None,
        ttft_max=s.ttft["max"] if s.ttft.count else None,
        failed=s.failed,
        peak=r.peak_engines,
        fewest=min((x.desired for x in r.replicas), default=r.config.engines),
    )


ROWS: tuple[tuple[str, str, str], ...] = (
    ("engine-seconds", "engine_s", "s"),
    ("SLO attainment", "slo", "pct"),
    ("TTFT p50", "ttft_p50", "ms"),
    ("TTFT p99", "ttft_p99", "ms"),
    ("TTFT max", "ttft_max", "ms"),
    ("failed requests", "failed", "n"),
    ("peak engines", "peak", "n"),
    ("fewest engines", "fewest", "n"),
)


def _show(v: float | None, unit: str) -> str:
    if v is None:
        return "n/a"
    return {"s": f"{v:.0f}", "pct": f"{v:.1%}", "ms": f"{v * 1e3:.0f} ms", "n": f"{v:.0f}"}[unit]


def _change(base: float | None, v: float | None, unit: str) -> str:
    if base is None or v is None:
        return ""
    if unit == "pct":
        return f"{(v - base) * 100:+.1f} pt"
    return f"{(v - base) / base:+.0%}" if base else ""


def report(
    sc: SimScenario, live: Sequence[LiveArm], virtual: Sequence[SimResult], args: argparse.Namespace
) -> None:
    labels = [a.label for a in sc.arms]
    lf = [live_figures(a, args.speedup) for a in live]
    vf = [virtual_figures(r) for r in virtual]
    day_s = plan_seconds(sc.base.load)
    print(f"\n{sc.title}")
    print(f"{sc.notes}")
    print(
        f"{len(sc.base.load.stages)} ramps, {day_s:.0f} simulated s "
        f"({day_s / args.speedup:.0f} s wall at speedup {args.speedup:g}); TTFT in simulated time"
    )
    width = 18
    head = "".join(f"{lab:>{width}}" for lab in labels)
    print(
        f"\n{'':<22}{'live (local target)':^{width * len(labels)}}  {'virtual clock':^{width * len(labels)}}"
    )
    print(f"{'measure':<22}{head}  {head}")
    for name, field_, unit in ROWS:
        cells = []
        for figs in (lf, vf):
            base = getattr(figs[0], field_)
            row = ""
            for i, f in enumerate(figs):
                v = getattr(f, field_)
                text = _show(v, unit)
                if i and field_ not in ("failed", "fewest"):
                    text += f" ({_change(base, v, unit)})" if _change(base, v, unit) else ""
                row += f"{text:>{width}}"
            cells.append(row)
        print(f"{name:<22}{cells[0]}  {cells[1]}")
    for arm, fig in zip(live, lf, strict=True):
        mean = fig.engine_s / args.speedup / max(arm.end - arm.start, 1e-9)
        starts = mean_start_up(arm.samples)
        started = f", engine start-up ~{starts:.1f} s wall" if starts is not None else ""
        print(
            f"live {arm.label}: {arm.end - arm.start:.0f} s wall, {mean:.2f} engines on average, "
            f"{arm.changes} scale decisions{started}"
        )
        summary = arm.bench.summary
        for kind, n in summary.error_kinds.items():
            print(f"  failed: {n} x {kind}: {summary.error_examples.get(kind, '')[:120]}")
    print()
    for i in range(1, len(lf)):
        saved, vsaved = 1 - lf[i].engine_s / lf[0].engine_s, 1 - vf[i].engine_s / vf[0].engine_s
        print(
            f"{labels[i]} saves {saved:.0%} of the static fleet's engine-seconds live (virtual clock: "
            f"{vsaved:.0%}), TTFT SLO met on {_show(lf[i].slo, 'pct')} live "
            f"({_show(vf[i].slo, 'pct')} virtual)"
        )


async def main(args: argparse.Namespace) -> None:
    sc = day_scenario(args)
    print(f"{sc.title}: {len(sc.arms)} arms live, then on the virtual clock", flush=True)
    window, quiet = idle_window(sc), quiet_seconds(sc)
    if window is not None and quiet <= window:
        print(
            f"note: the night lasts {quiet:.0f} s, the idle window {window:.0f} s: no arm reaches zero on "
            f"a day this short (--minutes {args.minutes * 2 * window / quiet:.0f}: half the night at zero)",
            flush=True,
        )
    load_before = os.getloadavg()
    live = []
    for arm in sc.arms:
        print(f"live: {arm.label}", flush=True)
        live.append(await run_live(sc, arm, args))
    load_after = os.getloadavg()
    print("virtual clock: the same arms in the cluster simulator", flush=True)
    began = time.monotonic()
    virtual = [simulate(arm.config(sc.base)) for arm in sc.arms]
    print(f"virtual clock: {time.monotonic() - began:.0f} s of wall time", flush=True)
    print(
        f"load average {load_before[0]:.1f} before, {load_after[0]:.1f} after (1 min) on {os.cpu_count()} "
        "cores; the live stack shares them with whatever else runs"
    )
    report(sc, live, virtual, args)


if __name__ == "__main__":
    from saved import save_if_asked  # benchmarks/saved.py

    save_if_asked()  # --save PATH: this run's output, command, date and commit as a result record
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--day", default="business", help="business, consumer or spiky (--zero: night)")
    parser.add_argument("--minutes", type=float, default=3.0, help="wall minutes of the day, per arm")
    parser.add_argument("--engines", type=int, default=4, help="the static fleet, and the autoscaler's max")
    parser.add_argument("--zero", action="store_true", help="the scale-to-zero day (night), with a 0-N arm")
    parser.add_argument("--sim-profile", default="llama3-8b-h100")
    parser.add_argument("--speedup", type=float, default=1.0, help="simulated seconds per wall second")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--base-port", type=int, default=23300)
    asyncio.run(main(parser.parse_args()))
