"""``infctl simulate compare``: the seed's comparisons on the simulator, printed side by side."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Group, RenderableType
from rich.text import Text

from infctl.bench.io import save_json
from infctl.cli.context import OutputFormat, global_options
from infctl.cli.files import check_writable
from infctl.cli.output import console, emit, err_console, errors_as_exit, simple_table
from infctl.cli.simulate import show_progress
from infctl.sim.cluster.scenarios import (
    GROUPS,
    SCENARIOS,
    ScenarioSize,
    SeededOutcome,
    build_scenarios,
    columns,
    run_seeded,
    scenario_rows,
    seeded_rows,
    verdicts,
)
from infctl.sim.profiles import get_profile

EPILOG = """
[bold]Scenarios[/] (all of them when none is named)

  [bold]bucketing[/]        length buckets (pools sized by the planner) vs one pool: short-prompt TTFT,
                   throughput at saturation
  [bold]prefix[/]           prefix-aware vs random routing on long shared prefixes: hit rate, TTFT, throughput
  [bold]prefix-mooncake[/]  the same on the Mooncake trace, time-compressed to load the fleet
  [bold]autoscaling[/]      a static fleet for the peak vs the reactive, a KEDA-style and infctl's autoscaler
                   over a business, a consumer and a spiky day (autoscaling-business, -consumer,
                   -spiky: one of them): GPU-hours, SLO attainment
  [bold]kv-tier[/]          HBM only vs a host-DRAM tier vs a slower shared pool: hit rate, TTFT, throughput
  [bold]pd[/]               aggregated vs Group-mode vs Pool-mode PD (1P1D groups), same engines and traffic:
                   TTFT/TPOT p50/p99, goodput, throughput
  [bold]scale-to-zero[/]    a static fleet vs infctl's autoscaler at 1 and at 0 engines over a day with a
                   night of no traffic (the router holds the first request): GPU-hours, SLO, TTFT max

[bold]Examples[/]

  [dim]# every comparison at the default size (a few minutes), the seed's figures beside ours[/]
  infctl simulate compare

  [dim]# two of them, bigger, each arm saved in the bench schema (infctl bench compare reads them)[/]
  infctl simulate compare prefix kv-tier --engines 16 --requests 4000 --save runs/

  [dim]# on Kimi K2 replicas (16 GPUs each): does offload still pay when HBM is 3x larger?[/]
  infctl simulate compare autoscaling kv-tier --profile kimi-k2-h200

  [dim]# does disaggregation pay on 16 engines (8 groups of 1 prefill + 1 decode)?[/]
  infctl simulate compare pd --engines 16 --requests 1000

  [dim]# a close call judged over 12 seeds, not one: each figure's mean (range), who won in how many seeds[/]
  infctl simulate compare autoscaling-business --seeds 12

  [dim]# the day as life has it: the fleet and autoscalers warm at midnight after 2 h of the evening before[/]
  infctl simulate compare autoscaling --lead-in 2

  [dim]# figures for a script: raw values in the unit each measure names (latency in seconds)[/]
  infctl simulate compare bucketing -o json | jq '.scenarios[0].measures'

Every arm runs the simulator's unchanged router presets, autoscaler policy and engine KV model on the same
workload and seed; DeepSeek-V3 (8xH200 per engine) unless --profile says otherwise; autoscaling uses half
the engines (its static fleet), the KV tier an eighth. Default trace: the public Mooncake trace shipped
with infctl.
"""


def compare_cmd(
    ctx: typer.Context,
    scenarios: Annotated[
        list[str] | None,
        typer.Argument(help=f"Any of: {', '.join([*GROUPS, *SCENARIOS])}.", show_default=False),
    ] = None,
    engines: Annotated[int, typer.Option(min=2, help="Engines of the routing comparisons.")] = 8,
    requests: Annotated[int, typer.Option(min=20, help="Requests per arm (a trace: its first ones).")] = 2000,
    seed: Annotated[
        int,
        typer.Option(
            help="Seed, the same for every arm: of the generated workloads and their arrivals (bucketing, "
            "prefix, autoscaling). A trace replayed at its timestamps (pd, prefix-mooncake, kv-tier) "
            "replays exactly; there the seed sets the router's scrape interval (0: 100 ms; 1, 2, 3...: "
            "93, 107, 86 ... 58..142 ms, repeating after 13), the timing noise that moves a live run's "
            "decisions: run a few seeds to see how far an arm's figures move by chance."
        ),
    ] = 0,
    seeds: Annotated[
        int,
        typer.Option(
            min=1,
            help="Run every scenario at N seeds (--seed, --seed+1 ... --seed+N-1) and show each figure's "
            "mean (min-max), the changes of the means, and in how many seeds each arm beat the first (with "
            "more arms, infctl's against each other arm): for a verdict that must not depend on chance, as a "
            "close call can flip from one seed to the next. Each seed is a full run: N times the time.",
        ),
    ] = 1,
    lead_in: Annotated[
        int,
        typer.Option(
            "--lead-in",
            min=0,
            max=12,
            metavar="HOURS",
            help="Autoscaling days: start each with this many hours of the evening before, not measured, so "
            "the fleet and the autoscalers meet midnight warm, as in life (default 0: a cold fleet at "
            "midnight).",
        ),
    ] = 0,
    profile: Annotated[
        str | None, typer.Option(help="Engine profile for every scenario (default: each its own).")
    ] = None,
    trace: Annotated[
        Path | None, typer.Option(help="Mooncake-format trace (default: the one shipped with infctl).")
    ] = None,
    save: Annotated[
        Path | None,
        typer.Option(
            help="Write each arm's result here (bench JSON schema), one file per arm (per arm and seed "
            "with --seeds: NAME--ARM--seed-N.json)."
        ),
    ] = None,
) -> None:
    """Run the seed's comparisons through the simulator and print them side by side."""
    opts = global_options(ctx)
    with errors_as_exit():
        check_writable("--save", save, directory=True)
        size = ScenarioSize(
            engines=engines,
            requests=requests,
            seed=seed,
            profile=get_profile(profile) if profile else None,
            trace=trace,
            lead_in_h=lead_in,
        )
        at = list(range(seed, seed + seeds))
        # Every seed's scenarios are built (and so validated) before anything runs.
        built = [build_scenarios(list(scenarios or []), replace(size, seed=s)) for s in at]
        progress = show_progress if err_console.is_terminal else None
        runs = [
            run_seeded(per_seed, at, on_arm=_say, progress=progress) for per_seed in zip(*built, strict=True)
        ]
        saved = _save(runs, save) if save else []
    _clear()
    if opts.output is OutputFormat.table:
        console.print(Group(*(_view(r) for r in runs), *(Text(f"wrote {p}", style="dim") for p in saved)))
    else:
        emit(opts, {"scenarios": [r.to_dict() for r in runs]})


def _view(runs: SeededOutcome) -> RenderableType:
    sc = runs.scenario
    if len(runs.seeds) == 1:
        table = simple_table(sc.title, columns(sc), scenario_rows(runs.outcomes[0]), numbers=True)
        return Group(table, Text(sc.notes, style="dim"), Text(""))
    table = simple_table(runs.title, columns(sc, runs.labels), seeded_rows(runs), numbers=True)
    said = (Text(line, style="bold") for line in verdicts(runs))
    return Group(table, *said, Text(runs.notes, style="dim"), Text(""))


def _save(runs: list[SeededOutcome], directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for r in runs:
        for seed, o in zip(r.seeds, r.outcomes, strict=True):
            tail = f"--seed-{seed}" if len(r.seeds) > 1 else ""
            for arm, result in zip(o.scenario.arms, o.results, strict=True):
                slug = re.sub(r"[^a-z0-9]+", "-", arm.label.lower()).strip("-")
                paths.append(save_json(result.to_dict(), directory / f"{o.scenario.name}--{slug}{tail}.json"))
    return paths


def _say(text: str) -> None:
    _clear()
    err_console.print(text, highlight=False)


def _clear() -> None:
    if err_console.is_terminal:
        err_console.print(" " * 78, end="\r")


def register(app: typer.Typer, **_: Any) -> None:
    """Add ``compare`` to the ``simulate`` group."""
    app.command("compare", epilog=EPILOG)(compare_cmd)
