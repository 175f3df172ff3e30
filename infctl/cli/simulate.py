"""``infctl simulate run``: simulated engines, the real router and autoscaler, on a virtual clock."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Group, RenderableType
from rich.text import Text

from infctl.autoscaler.settings import PolicyConfig, UnitConfig
from infctl.bench import parse_slo
from infctl.bench.config import LoadPlan
from infctl.bench.io import save_json, write_requests
from infctl.bench.slo import parse_duration
from infctl.bench.workloads import WORKLOAD_KINDS
from infctl.cli.bench_plan import load_plan, workload_spec
from infctl.cli.bench_views import result_view
from infctl.cli.context import OutputFormat, global_options
from infctl.cli.output import console, emit, err_console, errors_as_exit, simple_table
from infctl.errors import ConfigError
from infctl.sim.cluster import AutoscaleSettings, SimConfig, SimProgress, SimResult, simulate
from infctl.sim.cluster.admission import AdmissionSettings
from infctl.sim.cluster.pd import parse_layout
from infctl.sim.profiles import get_profile

app = typer.Typer(
    name="simulate",
    help="Simulate a whole cluster on a virtual clock: simulated engines, the real router and autoscaler.",
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
    no_args_is_help=True,
)

EXAMPLES = """
[bold]Examples[/]

  [dim]# the Mooncake trace on 16 engines with the recommended policy, saved in the bench schema[/]
  infctl simulate run --trace mooncake.jsonl --engines 16 --policy cache_aware --save ca.json

  [dim]# the same with round robin, then what prefix-aware routing bought[/]
  infctl simulate run --trace mooncake.jsonl --engines 16 --policy round_robin --save rr.json
  infctl bench compare rr.json ca.json

  [dim]# shared system prompts at 40 req/s for 10 minutes, autoscaled between 2 and 32 engines[/]
  infctl simulate run --workload shared-prefix --groups 16 --request-rate 40 --duration 10m \\
      --engines 4 --autoscale --min-engines 2 --max-engines 32 --startup 60s

  [dim]# prefill/decode disaggregated: 4 groups of 1 prefill + 1 decode engine, paired inside each group[/]
  infctl simulate run --trace mooncake.jsonl --pd 1P1D --pd-groups 4 --pd-mode group --save pd.json

  [dim]# the router's admission queue: hold up to 64 requests while every engine is saturated, then 429[/]
  infctl simulate run -n 2000 --request-rate 80 --engines 2 --admission-queue 64 --admission-deadline 5s

  [dim]# a custom policy, DeepSeek-V3 decode nodes (8 GPUs each), JSON for scripts[/]
  infctl -o json simulate run --policy '{"preset": "weighted", "settings": {"stale_after_s": 0.5}}' \\
      --profile deepseek-v3-h200-decode --gpus-per-engine 8 -n 500 --request-rate 20

Workload and load flags are [bold]infctl bench[/]'s: a scenario that runs here also runs against a live stack,
and both results compare with [bold]infctl bench compare[/]. Times are virtual: a day of traffic
takes minutes.
"""

_F, _W, _L, _S, _O = "Fleet and router", "Workload", "Load", "Autoscaler", "Output"
_P = "Disaggregation and admission"


@app.callback()
def simulate_group() -> None:
    """Cluster-scale simulation that reuses the live routing and scaling code."""


@app.command("run", epilog=EXAMPLES)
def run_cmd(
    ctx: typer.Context,
    engines: Annotated[
        int | None,
        typer.Option(
            min=1, help="Engines at the start (default 4; with --pd: the layout's).", rich_help_panel=_F
        ),
    ] = None,
    profile: Annotated[
        str, typer.Option(help="Engine profile (infctl.sim.profiles) or a profile file.", rich_help_panel=_F)
    ] = "llama3-8b-h100",
    policy: Annotated[
        str,
        typer.Option(
            help="Routing preset (cache_aware, round_robin, ...) or a policy JSON object.", rich_help_panel=_F
        ),
    ] = "cache_aware",
    scrape_interval: Annotated[
        str, typer.Option(help="How often the router refreshes engine signals.", rich_help_panel=_F)
    ] = "100ms",
    kv_events: Annotated[
        bool,
        typer.Option(
            "--kv-events/--no-kv-events",
            help="Engines publish KV events and the router routes on them (its precise prefix index).",
            rich_help_panel=_F,
        ),
    ] = False,
    gpus_per_engine: Annotated[int, typer.Option(min=1, help="For GPU-hours.", rich_help_panel=_F)] = 1,
    max_time: Annotated[
        str | None, typer.Option(help="Stop the virtual clock here (e.g. 2h).", rich_help_panel=_F)
    ] = None,
    workload: Annotated[
        str | None, typer.Option(help=f"{', '.join(WORKLOAD_KINDS)}.", rich_help_panel=_W)
    ] = None,
    input_tokens: Annotated[
        str, typer.Option(help="Prompt tokens: 512, normal:512,64...", rich_help_panel=_W)
    ] = "512",
    output_tokens: Annotated[
        str, typer.Option(help="Output tokens, same forms.", rich_help_panel=_W)
    ] = "128",
    mix: Annotated[
        list[str] | None, typer.Option(help="mixture: WEIGHT/INPUT/OUTPUT.", rich_help_panel=_W)
    ] = None,
    groups: Annotated[int, typer.Option(help="shared-prefix: prefix groups.", rich_help_panel=_W)] = 8,
    prefix_tokens: Annotated[
        int, typer.Option(help="shared-prefix: prefix tokens.", rich_help_panel=_W)
    ] = 2048,
    zipf: Annotated[
        float, typer.Option(help="shared-prefix: popularity exponent.", rich_help_panel=_W)
    ] = 1.0,
    conversations: Annotated[int, typer.Option(help="multi-turn: open at once.", rich_help_panel=_W)] = 16,
    turns: Annotated[int, typer.Option(help="multi-turn: turns each.", rich_help_panel=_W)] = 5,
    system_tokens: Annotated[int, typer.Option(help="multi-turn: system prompt.", rich_help_panel=_W)] = 0,
    trace: Annotated[
        Path | None,
        typer.Option(help="Mooncake-format trace (implies --workload trace).", rich_help_panel=_W),
    ] = None,
    time_scale: Annotated[
        float,
        typer.Option(
            "--time-scale",
            "--time-compression",
            "--trace-speedup",
            help="trace: replay this many times faster.",
            rich_help_panel=_W,
        ),
    ] = 1.0,
    input_scale: Annotated[float, typer.Option(help="trace: scale every prompt.", rich_help_panel=_W)] = 1.0,
    output_scale: Annotated[float, typer.Option(help="trace: scale every output.", rich_help_panel=_W)] = 1.0,
    trace_block_size: Annotated[
        int, typer.Option(help="trace: tokens per hash id.", rich_help_panel=_W)
    ] = 512,
    max_input_tokens: Annotated[
        int | None, typer.Option(help="trace: cut longer prompts to this.", rich_help_panel=_W)
    ] = None,
    dataset: Annotated[Path | None, typer.Option(help="ShareGPT-format file.", rich_help_panel=_W)] = None,
    num_requests: Annotated[
        int | None, typer.Option("-n", "--num-requests", help="Requests (default 100).", rich_help_panel=_L)
    ] = None,
    duration: Annotated[str | None, typer.Option(help="Or send for this long.", rich_help_panel=_L)] = None,
    request_rate: Annotated[
        str | None, typer.Option(help="Requests/s (default inf).", rich_help_panel=_L)
    ] = None,
    concurrency: Annotated[
        int | None, typer.Option(help="Or keep this many in flight.", rich_help_panel=_L)
    ] = None,
    arrivals: Annotated[
        str, typer.Option(help="poisson, gamma or constant.", rich_help_panel=_L)
    ] = "poisson",
    burstiness: Annotated[float, typer.Option(help="Gamma shape.", rich_help_panel=_L)] = 1.0,
    stages: Annotated[
        str | None, typer.Option(help="5:30s,10:30s | 1-20:60s | c8:100.", rich_help_panel=_L)
    ] = None,
    slo: Annotated[
        str | None, typer.Option(help="Goodput objectives: ttft=2s,tpot=50ms.", rich_help_panel=_L)
    ] = None,
    seed: Annotated[int, typer.Option(help="Workload and arrival seed.", rich_help_panel=_L)] = 0,
    autoscale: Annotated[bool, typer.Option(help="Run the autoscaler's policy.", rich_help_panel=_S)] = False,
    min_engines: Annotated[int, typer.Option(min=1, help="Fewest engines.", rich_help_panel=_S)] = 1,
    max_engines: Annotated[int, typer.Option(min=1, help="Most engines.", rich_help_panel=_S)] = 64,
    scale_interval: Annotated[str, typer.Option(help="Between decisions.", rich_help_panel=_S)] = "15s",
    startup: Annotated[str, typer.Option(help="Ask to serving, per engine.", rich_help_panel=_S)] = "60s",
    queue_up: Annotated[
        float, typer.Option(help="Scale up above this queue/engine.", rich_help_panel=_S)
    ] = 8.0,
    down_window: Annotated[
        str, typer.Option(help="Low this long before a scale-down.", rich_help_panel=_S)
    ] = "300s",
    ttft_slo: Annotated[
        str | None, typer.Option(help="Scale up while TTFT p99 exceeds it.", rich_help_panel=_S)
    ] = None,
    pd: Annotated[
        str | None,
        typer.Option(
            help="Disaggregate: each group has x prefill and y decode engines (1P1D, 2P1D...).",
            rich_help_panel=_P,
        ),
    ] = None,
    pd_groups: Annotated[
        int, typer.Option(min=1, help="PD groups (one switch each).", rich_help_panel=_P)
    ] = 1,
    pd_mode: Annotated[
        str,
        typer.Option(
            help="group: pair inside a group; pool: any prefill with any decode.", rich_help_panel=_P
        ),
    ] = "group",
    pd_min_uncached_tokens: Annotated[
        int,
        typer.Option(
            min=0, help="Shorter uncached prompts prefill on the decode engine.", rich_help_panel=_P
        ),
    ] = 512,
    intra_group_gbps: Annotated[
        float | None,
        typer.Option(help="KV link in a group, GB/s (default: the profile's).", rich_help_panel=_P),
    ] = None,
    cross_group_gbps: Annotated[
        float | None, typer.Option(help="KV link between groups, GB/s (default: half).", rich_help_panel=_P)
    ] = None,
    admission_queue: Annotated[
        int | None,
        typer.Option(
            min=1, help="Hold up to N requests while every engine is saturated.", rich_help_panel=_P
        ),
    ] = None,
    admission_deadline: Annotated[
        str, typer.Option(help="Longest wait in that queue before a 429.", rich_help_panel=_P)
    ] = "30s",
    short_prompt_tokens: Annotated[
        int, typer.Option(min=0, help="Prompts up to this long leave the queue first.", rich_help_panel=_P)
    ] = 2048,
    label: Annotated[
        str | None, typer.Option(help="Name of this run in reports.", rich_help_panel=_O)
    ] = None,
    save: Annotated[
        Path | None, typer.Option(help="Write the result (bench JSON schema).", rich_help_panel=_O)
    ] = None,
    requests_out: Annotated[
        Path | None, typer.Option(help="Per-request rows: FILE.jsonl or FILE.csv.", rich_help_panel=_O)
    ] = None,
) -> None:
    """Simulate [bold]--engines N[/] engines behind the router on a workload; print a bench-style report."""
    opts = global_options(ctx)
    with errors_as_exit():
        kind = workload or ("trace" if trace else "sharegpt" if dataset else "mixture" if mix else "random")
        spec = workload_spec(
            kind,
            input_tokens,
            output_tokens,
            mix,
            {
                "groups": groups,
                "prefix_tokens": prefix_tokens,
                "zipf": zipf,
                "trace": trace,
                "conversations": conversations,
                "turns": turns,
                "system_tokens": system_tokens,
                "dataset": dataset,
                "time_compression": time_scale,
                "input_scale": input_scale,
                "output_scale": output_scale,
                "trace_block_size": trace_block_size,
                "max_input_tokens": max_input_tokens,
            },
        )
        plan = load_plan(
            kind, num_requests, duration, request_rate, concurrency, stages, arrivals, burstiness, 0, None
        )
        scaling = None
        if autoscale:
            policy_cfg = PolicyConfig(
                units=(UnitConfig("both", min=min_engines, max=max_engines),),
                queue_up=queue_up,
                down_window_s=parse_duration(down_window, what="--down-window"),
                ttft_slo_s=parse_duration(ttft_slo, what="--ttft-slo") if ttft_slo else None,
            )
            scaling = AutoscaleSettings(
                policy=policy_cfg,
                interval_s=parse_duration(scale_interval, what="--scale-interval"),
                startup_s=parse_duration(startup, what="--startup"),
            )
        layout = None
        if pd:
            layout = replace(
                parse_layout(pd, groups=pd_groups, mode=pd_mode, min_uncached_tokens=pd_min_uncached_tokens),
                intra_group_gbps=intra_group_gbps,
                cross_group_gbps=cross_group_gbps,
            )
        admission = None
        if admission_queue is not None:
            admission = AdmissionSettings(
                queue=admission_queue,
                deadline_s=parse_duration(admission_deadline, what="--admission-deadline"),
                short_prompt_tokens=short_prompt_tokens,
            )
        cfg = _config(
            spec,
            plan,
            engines=engines or (layout.size if layout else 4),
            pd=layout,
            admission=admission,
            profile=get_profile(profile),
            policy=_policy(policy),
            autoscale=scaling,
            scrape_interval_s=parse_duration(scrape_interval, what="--scrape-interval"),
            kv_events=kv_events,
            gpus_per_engine=gpus_per_engine,
            seed=seed,
            slo=parse_slo(slo) if slo else None,
            label=label or "",
            max_time_s=parse_duration(max_time, what="--max-time") if max_time else None,
        )
        result = simulate(cfg, progress=show_progress if err_console.is_terminal else None)
        if err_console.is_terminal:
            err_console.print(" " * 60, end="\r")
        data = result.to_dict()
        if save:
            save_json(data, save)
        if requests_out:
            write_requests(result.bench.requests, requests_out)
    if opts.output is OutputFormat.table:
        console.print(_view(result, data, [p for p in (save, requests_out) if p]))
    else:
        emit(opts, data)


def _config(spec: dict[str, Any], plan: dict[str, Any], **kwargs: Any) -> SimConfig:
    """Validate the workload and load plan with bench's own models (errors name the field)."""
    from pydantic import TypeAdapter, ValidationError

    from infctl.bench.workloads import WorkloadSpec

    try:
        workload = TypeAdapter(WorkloadSpec).validate_python(spec)
        load = LoadPlan.model_validate(plan)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ConfigError(
            f"{where}: {first['msg'].removeprefix('Value error, ')}", hint="see infctl simulate run --help"
        ) from None
    return SimConfig(workload=workload, load=load, **kwargs)


def _policy(text: str) -> str | dict[str, Any]:
    if not text.lstrip().startswith("{"):
        return text
    try:
        value = json.loads(text)
    except ValueError as e:
        raise ConfigError(
            f"--policy: not JSON ({e})", hint="""e.g. --policy '{"preset": "cache_aware"}'"""
        ) from None
    if not isinstance(value, dict):
        raise ConfigError("--policy: expected a preset name or a JSON object")
    return value


def show_progress(p: SimProgress) -> None:
    """One self-overwriting stderr line: virtual time, requests, engines, wall time."""
    total = f"/{p.total}" if p.total else ""
    err_console.print(
        f"simulated {p.sim_time_s:8.1f} s  sent {p.sent}{total}  done {p.completed}  engines {p.engines}  "
        f"wall {p.wall_s:5.1f} s",
        end="\r",
        highlight=False,
    )


def _view(result: SimResult, data: dict[str, Any], saved: list[Path]) -> RenderableType:
    sim = data["simulation"]
    rows = [
        ("engines", f"{sim['engines']} at start, {sim['peak_engines']} at peak ({sim['profile']})"),
        ("policy", str(sim["policy"])),
        ("prefix-cache hit rate", _pct(result.hit_rate)),
        ("GPU-hours", f"{sim['gpu_hours']:.3f}"),
        ("decisions", ", ".join(f"{k} {v}" for k, v in sorted(sim["decisions"].items()))),
        (
            "virtual time",
            f"{sim['sim_time_s']:.1f} s in {sim['wall_s']:.1f} s wall "
            f"({sim['steps']} steps, {sim['events']} events)",
        ),
    ]
    if sim.get("pd"):
        pd = sim["pd"]
        rows.append(
            (
                "disaggregation",
                f"{pd['layout']} {pd['mode']} mode; "
                + ", ".join(f"{k} {v}" for k, v in sorted(pd["requests"].items()))
                + "; transfers "
                + (", ".join(f"{k} {v}" for k, v in sorted(pd["transfers"].items())) or "none")
                + f" ({pd['intra_group_gbps']:g}/{pd['cross_group_gbps']:g} GB/s)",
            )
        )
    if sim.get("admission"):
        adm = sim["admission"]
        refused = ", ".join(f"{k} {v}" for k, v in sorted(adm["refused"].items())) or "none"
        rows.append(
            (
                "admission",
                f"queue {adm['queue']}: held {adm['held']}, released {adm['admitted_after_wait']}, "
                f"refused (429) {refused}",
            )
        )
    if sim["scale_events"]:
        rows.append(
            ("scaling", ", ".join(f"{e['t']:.0f}s {e['from']}->{e['to']}" for e in sim["scale_events"][:12]))
        )
    parts: list[RenderableType] = [
        result_view(data, saved),
        simple_table("simulation", ["", ""], rows),
    ]
    return Group(*parts, Text(""))


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def register(root: typer.Typer) -> None:
    from infctl.cli.simulate_compare import register as add_compare  # infctl simulate compare

    add_compare(app)
    root.add_typer(app)
