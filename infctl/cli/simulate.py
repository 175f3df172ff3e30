"""``infctl simulate run``: simulated engines, the real router and autoscaler, on a virtual clock."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import typer
from rich.console import Group, RenderableType
from rich.text import Text

from infctl.autoscaler.settings import PolicyConfig, UnitConfig
from infctl.bench import parse_slo
from infctl.bench.config import LoadPlan
from infctl.bench.io import save_json, write_requests
from infctl.bench.slo import parse_duration
from infctl.cli import simulate_options as o
from infctl.cli.bench_plan import load_plan, workload_kind, workload_spec
from infctl.cli.bench_views import result_view
from infctl.cli.context import OutputFormat, global_options
from infctl.cli.files import check_writable
from infctl.cli.output import console, emit, err_console, errors_as_exit, simple_table
from infctl.errors import ConfigError
from infctl.sim.cluster import AutoscaleSettings, SimConfig, SimProgress, SimResult, simulate
from infctl.sim.cluster.admission import AdmissionSettings
from infctl.sim.cluster.pd import parse_layout
from infctl.sim.profiles import get_profile

app = typer.Typer(
    name="simulate",
    help="Simulate a whole cluster on a virtual clock: simulated engines, the real router and autoscaler.",
    epilog=(
        "\n[bold]Examples[/]\n\n"
        "  # 500 requests at 20 req/s on 4 engines behind the cache-aware router: a bench-style report\n"
        "  infctl simulate run -n 500 --request-rate 20 --engines 4\n\n"
        "  # one of the seed's comparisons, small (infctl simulate compare --help lists them)\n"
        "  infctl simulate compare prefix --requests 200\n"
    ),
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


@app.callback()
def simulate_group() -> None:
    """Cluster-scale simulation that reuses the live routing and scaling code."""


@app.command("run", epilog=EXAMPLES)
def run_cmd(
    ctx: typer.Context,
    engines: o.Engines = None,
    profile: o.Profile = "llama3-8b-h100",
    policy: o.Policy = "cache_aware",
    scrape_interval: o.ScrapeInterval = "100ms",
    kv_events: o.KvEvents = False,
    gpus_per_engine: o.GpusPerEngine = 1,
    max_time: o.MaxTime = None,
    workload: o.Workload = None,
    input_tokens: o.InputTokens = "512",
    output_tokens: o.OutputTokens = "128",
    mix: o.Mix = None,
    groups: o.Groups = 8,
    prefix_tokens: o.PrefixTokens = 2048,
    zipf: o.Zipf = 1.0,
    conversations: o.Conversations = 16,
    turns: o.Turns = 5,
    system_tokens: o.SystemTokens = 0,
    trace: o.Trace = None,
    time_scale: o.TimeScale = 1.0,
    input_scale: o.InputScale = 1.0,
    output_scale: o.OutputScale = 1.0,
    trace_block_size: o.TraceBlockSize = 512,
    max_input_tokens: o.MaxInputTokens = None,
    dataset: o.Dataset = None,
    num_requests: o.NumRequests = None,
    duration: o.Duration = None,
    request_rate: o.RequestRate = None,
    concurrency: o.Concurrency = None,
    arrivals: o.Arrivals = "poisson",
    burstiness: o.Burstiness = 1.0,
    stages: o.Stages = None,
    slo: o.Slo = None,
    seed: o.Seed = 0,
    autoscale: o.Autoscale = False,
    min_engines: o.MinEngines = 1,
    max_engines: o.MaxEngines = 64,
    scale_interval: o.ScaleInterval = "15s",
    startup: o.Startup = "60s",
    queue_up: o.QueueUp = 8.0,
    down_window: o.DownWindow = "300s",
    ttft_slo: o.TtftSlo = None,
    pd: o.Pd = None,
    pd_groups: o.PdGroups = 1,
    pd_mode: o.PdMode = "group",
    pd_min_uncached_tokens: o.PdMinUncachedTokens = 512,
    intra_group_gbps: o.IntraGroupGbps = None,
    cross_group_gbps: o.CrossGroupGbps = None,
    admission_queue: o.AdmissionQueue = None,
    admission_deadline: o.AdmissionDeadline = "30s",
    short_prompt_tokens: o.ShortPromptTokens = 2048,
    label: o.Label = None,
    save: o.Save = None,
    requests_out: o.RequestsOut = None,
) -> None:
    """Simulate [bold]--engines N[/] engines behind the router on a workload; print a bench-style report."""
    opts = global_options(ctx)
    with errors_as_exit():
        check_writable("--save", save)
        check_writable("--requests-out", requests_out)
        if not autoscale:
            _only_with(ctx, "--autoscale", _AUTOSCALE_FLAGS)
        if not pd:
            _only_with(ctx, "--pd xPyD", _PD_FLAGS)
        if admission_queue is None:
            _only_with(ctx, "--admission-queue N", _ADMISSION_FLAGS)
        kind = workload_kind(workload, trace=trace, dataset=dataset, mix=mix)
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
        scaling = (
            _autoscale(min_engines, max_engines, queue_up, down_window, ttft_slo, scale_interval, startup)
            if autoscale
            else None
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


_AUTOSCALE_FLAGS = (
    "min_engines",
    "max_engines",
    "scale_interval",
    "startup",
    "queue_up",
    "down_window",
    "ttft_slo",
)
_PD_FLAGS = ("pd_groups", "pd_mode", "pd_min_uncached_tokens", "intra_group_gbps", "cross_group_gbps")
_ADMISSION_FLAGS = ("admission_deadline", "short_prompt_tokens")


def _only_with(ctx: typer.Context, switch: str, names: tuple[str, ...]) -> None:
    """A flag of a section whose switch is off was ignored without a word (``--pd-groups 4`` alone ran an
    aggregated fleet): refused, naming both."""
    source = ctx.get_parameter_source
    given = ["--" + n.replace("_", "-") for n in names if getattr(source(n), "name", "") == "COMMANDLINE"]
    if given:
        raise ConfigError(
            f"{', '.join(given)} only appl{'y' if len(given) > 1 else 'ies'} with {switch}",
            hint=f"add {switch}, or drop {', '.join(given)}",
        )


def _autoscale(
    min_engines: int,
    max_engines: int,
    queue_up: float,
    down_window: str,
    ttft_slo: str | None,
    scale_interval: str,
    startup: str,
) -> AutoscaleSettings:
    """The autoscaler's policy and pacing from the Autoscaler flags (errors name the flag)."""
    policy = PolicyConfig(
        units=(UnitConfig("both", min=min_engines, max=max_engines),),
        queue_up=queue_up,
        down_window_s=parse_duration(down_window, what="--down-window"),
        ttft_slo_s=parse_duration(ttft_slo, what="--ttft-slo") if ttft_slo else None,
    )
    return AutoscaleSettings(
        policy=policy,
        interval_s=parse_duration(scale_interval, what="--scale-interval"),
        startup_s=parse_duration(startup, what="--startup"),
    )


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
