"""``infctl demo``: the first command to try. Starts the local demo stack, sends it two requests, stops it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Group, RenderableType
from rich.table import Table

from infctl.cli.context import OutputFormat, global_options
from infctl.cli.files import check_run_dir, check_writable
from infctl.cli.output import console, emit, err_console, errors_as_exit, kv_table, simple_table
from infctl.config import load_deployment
from infctl.local.demo import DemoResult, demo_plan, find_demo_profile, run_demo

EXAMPLES = """
Examples:

  infctl demo                                  # the stack, two chat requests, the comparisons (~2 min)

  infctl demo --quick                          # the two chat requests only (~10 s)

  infctl demo --set router.port=18000 --set local.base_port=18100   # when 8000 or 8100+ are taken

  infctl -o json demo --quick                  # the results for a script
"""


def demo(
    ctx: typer.Context,
    file: Annotated[
        Path | None,
        typer.Option("-f", "--file", help="Profile to run; default: profiles/local-length-pools.yaml."),
    ] = None,
    overrides: Annotated[
        list[str] | None,
        typer.Option(
            "--set", metavar="KEY.PATH=VALUE", help="Override a profile key, e.g. router.port=18000."
        ),
    ] = None,
    run_dir: Annotated[
        Path | None, typer.Option("--run-dir", help="Where logs go; default: local.run_dir.")
    ] = None,
    quick: Annotated[
        bool, typer.Option("--quick", help="Only the two chat requests; skip the comparisons (~10 s).")
    ] = False,
    report: Annotated[
        Path | None, typer.Option("--report", help="HTML report path; default: in the run directory.")
    ] = None,
) -> None:
    """Start the local demo stack, show it working, run the seed's comparisons side by side, stop it.

    The stack is profiles/local-length-pools.yaml: simulated engines in a short and a long length pool
    behind the router, no GPU needed. Two chat requests come first (the second repeats the first one's
    system prompt, so its cached_tokens show the prefix cache at work). Then, on the same stack: round robin
    vs infctl's cache-aware routing on shared prefixes, and one pool vs the profile's length pools on mixed
    lengths; a table of the seed's measures is printed and an HTML report with plots is written. About two
    minutes.

    Each arm starts on empty prefix caches: the demo starts its engines able to reset them (vLLM, real or
    simulated: VLLM_SERVER_DEV_MODE=1, whose endpoints are not for production; everything stops when the
    demo ends). A profile whose env sets VLLM_SERVER_DEV_MODE=0 fails before the first arm, saying so.
    """
    opts = global_options(ctx)
    with errors_as_exit():
        path = find_demo_profile(file)
        plan = demo_plan(load_deployment(path, [*(overrides or []), "target=local"]), run_dir)
        check_run_dir(run_dir, plan.run_dir)
        check_writable("--report", report)
        if opts.output is OutputFormat.table:
            with err_console.status(f"starting {len(plan.specs)} processes from {path}...") as spinner:
                result = run_demo(plan, progress=spinner.update, quick=quick, report=report)
            console.print(demo_report(result))
        else:
            emit(opts, run_demo(plan, quick=quick, report=report).to_dict())


def demo_report(result: DemoResult) -> Group:
    first, second = result.first, result.repeated_prefix
    hit = f"{second.cached_tokens} of {second.prompt_tokens} prompt tokens" if second.prompt_tokens else "n/a"
    summary: Table = kv_table(
        "infctl demo",
        {
            "stack": f"{result.processes} processes, healthy in {result.startup_s:.1f} s",
            "endpoint": f"{result.url}  (model {result.model})",
            "TTFT": f"{first.ttft_s * 1e3:.0f} ms, then {second.ttft_s * 1e3:.0f} ms (repeated prefix)",
            "prefix cache": f"{hit} served from cache on the repeated-prefix request",
        },
    )
    parts: list[RenderableType] = [f"[bold]reply:[/] {first.reply}", summary]
    for sc in result.scenarios:
        parts.append(
            simple_table(sc.name, ["measure", sc.baseline, sc.infctl, "change", "seed reported"], sc.rows)
        )
    if result.scenarios:
        parts.append(f"[dim]{SEED_REPORTED}[/]")
    if result.report:
        parts.append(f"report: {result.report}")
    parts.append("everything the demo started is stopped")
    return Group(*parts)


SEED_REPORTED = (
    "seed reported: the change the seed (the design brief infctl started from) reported for the same "
    "comparison on its production fleet, quoted as written, not measured here; compare its direction and "
    "rough size with ours, not its digits (other models, GPUs and traffic)."
)


def register(app: typer.Typer) -> None:
    app.command("demo", epilog=EXAMPLES)(demo)
