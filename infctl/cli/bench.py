"""``infctl bench``: measure TTFT, TPOT, ITL, E2E, throughput and goodput; ``infctl bench compare``."""

from __future__ import annotations

import asyncio
import contextlib
import math
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import RenderableType
from rich.live import Live
from rich.text import Text

from infctl.bench import BenchConfig, BenchResult, Progress, compare, parse_slo, validate_config
from infctl.bench.compare import load_result
from infctl.bench.flags import parse_headers, parse_json_object, parse_rates
from infctl.bench.io import save_json, save_text, write_requests
from infctl.bench.slo import parse_duration
from infctl.bench.sweep import MaxRateResult, SweepResult, find_max_rate, sweep
from infctl.bench.workloads import TEXT_KINDS, WORKLOAD_KINDS
from infctl.cli.bench_plan import load_plan, workload_kind, workload_spec
from infctl.cli.bench_views import comparison_view, progress_view, result_view, sweep_view
from infctl.cli.context import GlobalOptions, OutputFormat, global_options
from infctl.cli.files import check_writable
from infctl.cli.flags import url_option
from infctl.cli.output import console, emit, err_console, errors_as_exit
from infctl.errors import ConfigError

app = typer.Typer(
    name="bench",
    help="Benchmark an OpenAI-compatible server: exact TTFT/TPOT/ITL/E2E, throughput, goodput, errors.",
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
)

EXAMPLES = """
[bold]Examples[/]

  [dim]# 200 random requests at 10 req/s (Poisson), saved for later comparison[/]
  infctl bench --url http://127.0.0.1:8000 --num-requests 200 --request-rate 10 --save a.json

  [dim]# shared system prompts (8 groups, Zipf popularity), chat API, SLOs and the engines' own view[/]
  infctl bench --url http://127.0.0.1:8000 --api chat --workload shared-prefix --groups 8 \\
      --prefix-tokens 2048 --input-tokens normal:256,64 --duration 60s --concurrency 16 \\
      --slo ttft=2s,tpot=50ms --engine-url http://127.0.0.1:8101 --engine-url http://127.0.0.1:8102

  [dim]# replay the Mooncake trace ten times faster, prompts scaled to a tenth[/]
  infctl bench --url http://127.0.0.1:8000 --trace mooncake.jsonl --trace-speedup 10 --input-scale 0.1

  [dim]# Chinese chat prompts of exactly 2,048 tokens for the served model's tokenizer[/]
  infctl bench --url ... --api chat --tokenizer Qwen/Qwen3-8B --text zh --input-tokens 2048

  [dim]# 80% short chats, 20% long documents; a two-stage plan and a ramp[/]
  infctl bench --url ... --workload mixture --mix 0.8/128/64 --mix 0.2/normal:4096,512/256 \\
      --stages 5:30s,10:30s,10-40:60s

  [dim]# sweep rates, or find the highest rate meeting the SLOs; HTML report with plots[/]
  infctl bench --url ... -n 200 --sweep 1,2,4,8 --html sweep.html
  infctl bench --url ... -n 200 --find-max --slo ttft=500ms,tpot=50ms

  [dim]# what changed between two runs, in percent[/]
  infctl bench compare a.json b.json

Ctrl-C stops the run and keeps the results of the requests that finished.
"""

_T, _W, _L, _M, _O = "Target", "Workload", "Load", "Measurement", "Output"


@app.callback(invoke_without_command=True, epilog=EXAMPLES)
def bench(
    ctx: typer.Context,
    url: Annotated[
        str | None, url_option("--url", help="Server base URL (router or engine).", rich_help_panel=_T)
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="Model name; default: the first of /v1/models.", rich_help_panel=_T)
    ] = None,
    api: Annotated[str, typer.Option(help="completions or chat.", rich_help_panel=_T)] = "completions",
    endpoint: Annotated[
        str | None, typer.Option(help="Path to post to (default by --api).", rich_help_panel=_T)
    ] = None,
    header: Annotated[
        list[str] | None,
        typer.Option("-H", "--header", help="'Name: value' (repeatable).", rich_help_panel=_T),
    ] = None,
    extra_body: Annotated[
        str | None,
        typer.Option(help="JSON merged into each body: '{\"ignore_eos\":true}'.", rich_help_panel=_T),
    ] = None,
    timeout: Annotated[
        str, typer.Option(help="Per-request limit (fails as 'timeout').", rich_help_panel=_T)
    ] = "600s",
    workload: Annotated[
        str | None, typer.Option(help=f"{', '.join(WORKLOAD_KINDS)}.", rich_help_panel=_W)
    ] = None,
    tokenizer: Annotated[
        str | None,
        typer.Option(
            help="Write prompts of exact token lengths for this tokenizer: a model directory, "
            "tokenizer.json or Hugging Face id (or estimate, words). Default: words for English text, the "
            "estimate for other text; reported lengths are the server's usage either way.",
            rich_help_panel=_W,
        ),
    ] = None,
    text: Annotated[
        str,
        typer.Option(
            help=f"What synthetic prompts are written in: {', '.join(TEXT_KINDS)} (Chinese, code, a mix).",
            rich_help_panel=_W,
        ),
    ] = "en",
    input_tokens: Annotated[
        str,
        typer.Option(
            help="Prompt tokens: 512, uniform:256,768, normal:512,64, lognormal:512,0.5 "
            "(shared-prefix: after the prefix; multi-turn: each user turn).",
            rich_help_panel=_W,
        ),
    ] = "512",
    output_tokens: Annotated[
        str, typer.Option(help="Output length (max_tokens), same forms.", rich_help_panel=_W)
    ] = "128",
    mix: Annotated[
        list[str] | None, typer.Option(help="mixture: WEIGHT/INPUT/OUTPUT (repeatable).", rich_help_panel=_W)
    ] = None,
    groups: Annotated[int, typer.Option(help="shared-prefix: prefix groups.", rich_help_panel=_W)] = 8,
    prefix_tokens: Annotated[
        int, typer.Option(help="shared-prefix: tokens of each group's prefix.", rich_help_panel=_W)
    ] = 2048,
    zipf: Annotated[
        float, typer.Option(help="shared-prefix: popularity exponent (0 = uniform).", rich_help_panel=_W)
    ] = 1.0,
    conversations: Annotated[
        int, typer.Option(help="multi-turn: conversations open at once.", rich_help_panel=_W)
    ] = 16,
    turns: Annotated[int, typer.Option(help="multi-turn: turns per conversation.", rich_help_panel=_W)] = 5,
    system_tokens: Annotated[
        int, typer.Option(help="multi-turn: system prompt tokens.", rich_help_panel=_W)
    ] = 0,
    trace: Annotated[
        Path | None,
        typer.Option(help="Mooncake-format trace to replay (implies --workload trace).", rich_help_panel=_W),
    ] = None,
    time_compression: Annotated[
        float,
        typer.Option(
            "--time-compression",
            "--trace-speedup",
            help="trace: replay this many times faster.",
            rich_help_panel=_W,
        ),
    ] = 1.0,
    input_scale: Annotated[
        float, typer.Option(help="trace: scale every prompt (block by block).", rich_help_panel=_W)
    ] = 1.0,
    output_scale: Annotated[
        float, typer.Option(help="trace: scale every output length.", rich_help_panel=_W)
    ] = 1.0,
    trace_block_size: Annotated[
        int, typer.Option(help="trace: tokens per hash id.", rich_help_panel=_W)
    ] = 512,
    max_input_tokens: Annotated[
        int | None, typer.Option(help="trace/sharegpt: cut or skip longer prompts.", rich_help_panel=_W)
    ] = None,
    dataset: Annotated[
        Path | None,
        typer.Option(help="ShareGPT-format file (implies --workload sharegpt).", rich_help_panel=_W),
    ] = None,
    num_requests: Annotated[
        int | None,
        typer.Option("-n", "--num-requests", help="Requests to send (default 100).", rich_help_panel=_L),
    ] = None,
    duration: Annotated[
        str | None, typer.Option(help="Or send for this long: 30s, 5m.", rich_help_panel=_L)
    ] = None,
    request_rate: Annotated[
        str | None, typer.Option(help="Requests/s (default inf: all at once).", rich_help_panel=_L)
    ] = None,
    concurrency: Annotated[
        int | None, typer.Option(help="Or keep this many in flight.", rich_help_panel=_L)
    ] = None,
    arrivals: Annotated[
        str, typer.Option(help="poisson, gamma or constant gaps.", rich_help_panel=_L)
    ] = "poisson",
    burstiness: Annotated[
        float, typer.Option(help="Gamma shape: 1 Poisson, <1 bursty.", rich_help_panel=_L)
    ] = 1.0,
    stages: Annotated[
        str | None, typer.Option(help="Plan: 5:30s,10:30s | 1-20:60s ramp | c8:100.", rich_help_panel=_L)
    ] = None,
    warmup: Annotated[int, typer.Option(help="Unmeasured requests first.", rich_help_panel=_L)] = 0,
    max_concurrency: Annotated[
        int | None, typer.Option(help="Cap in flight at a rate.", rich_help_panel=_L)
    ] = None,
    sweep_rates: Annotated[
        str | None, typer.Option("--sweep", help="Run once per rate: 1,2,4,8.", rich_help_panel=_L)
    ] = None,
    find_max: Annotated[
        bool,
        typer.Option(
            "--find-max",
            help="Search the highest rate meeting --slo, from --request-rate (default 1).",
            rich_help_panel=_L,
        ),
    ] = False,
    attainment: Annotated[
        float, typer.Option(help="--find-max: share of good requests needed.", rich_help_panel=_L)
    ] = 0.9,
    slo: Annotated[
        str | None, typer.Option(help="Goodput objectives: ttft=2s,tpot=50ms,e2e=20s.", rich_help_panel=_M)
    ] = None,
    seed: Annotated[int, typer.Option(help="Workload and arrival seed.", rich_help_panel=_M)] = 0,
    engine_url: Annotated[
        list[str] | None,
        url_option(
            "--engine-url", help="Engine to scrape for the server view (repeatable).", rich_help_panel=_M
        ),
    ] = None,
    engine: Annotated[
        str | None, typer.Option(help="vllm or sglang (default: detected).", rich_help_panel=_M)
    ] = None,
    label: Annotated[
        str | None, typer.Option(help="Name of this run in reports.", rich_help_panel=_M)
    ] = None,
    save: Annotated[
        Path | None, typer.Option(help="Write the JSON summary here.", rich_help_panel=_O)
    ] = None,
    requests_out: Annotated[
        Path | None, typer.Option(help="Per-request rows: FILE.jsonl or FILE.csv.", rich_help_panel=_O)
    ] = None,
    html: Annotated[Path | None, typer.Option(help="HTML report with plots.", rich_help_panel=_O)] = None,
) -> None:
    """Run a benchmark: [bold]infctl bench --url URL[/] [workload] [load] [--save FILE.json]."""
    if ctx.invoked_subcommand is not None:
        return
    opts = global_options(ctx)
    with errors_as_exit():
        if url is None:
            raise ConfigError("--url is required", hint="e.g. infctl bench --url http://127.0.0.1:8000")
        for flag, path in (("--save", save), ("--requests-out", requests_out), ("--html", html)):
            check_writable(flag, path)
        kind = workload_kind(workload, trace=trace, dataset=dataset, mix=mix)
        data: dict[str, Any] = {
            "url": url, "model": model, "api": api, "endpoint": endpoint,
            "tokenizer": tokenizer, "text": text,
            "headers": parse_headers(header or []),
            "extra_body": parse_json_object(extra_body, "--extra-body") if extra_body else {},
            "timeout_s": parse_duration(timeout, what="--timeout"),
            "workload": workload_spec(kind, input_tokens, output_tokens, mix, {
                "groups": groups, "prefix_tokens": prefix_tokens, "zipf": zipf, "trace": trace,
                "conversations": conversations, "turns": turns, "system_tokens": system_tokens,
                "dataset": dataset, "time_compression": time_compression, "input_scale": input_scale,
                "output_scale": output_scale, "trace_block_size": trace_block_size,
                "max_input_tokens": max_input_tokens,
            }),
            "load": load_plan(kind, num_requests, duration, request_rate, concurrency, stages, arrivals,
                              burstiness, warmup, max_concurrency),
            "slo": parse_slo(slo) if slo else None, "seed": seed, "engine_urls": engine_url or [],
            "engine": engine, "label": label or "",
        }  # fmt: skip
        cfg = validate_config(data)
        if sweep_rates or find_max:
            outcome = _sweep(cfg, opts, sweep_rates, find_max, attainment)
            if save:
                save_json(outcome.to_dict(), save)
            if html:
                from infctl.bench.report import sweep_html

                save_text(sweep_html(outcome), html)
            _emit(opts, outcome.to_dict(), lambda: sweep_view(outcome))
            return
        result = _run_live(cfg, opts)
        summary = result.to_dict()
        if save:
            save_json(summary, save)
        if requests_out:
            write_requests(result.requests, requests_out)
        if html:
            from infctl.bench.report import result_html

            save_text(result_html(result), html)
        written = [p for p in (save, requests_out, html) if p]
        _emit(opts, summary, lambda: result_view(summary, saved=written))


@app.command("compare")
def compare_cmd(
    ctx: typer.Context,
    a: Annotated[Path, typer.Argument(help="Baseline result (infctl bench --save).")],
    b: Annotated[Path, typer.Argument(help="Result to compare with the baseline.")],
) -> None:
    """Print how run B differs from run A, metric by metric, in percent."""
    opts = global_options(ctx)
    with errors_as_exit():
        comparison = compare(load_result(a), load_result(b))
    _emit(opts, comparison.to_dict(), lambda: comparison_view(comparison))


def _emit(opts: GlobalOptions, data: dict[str, Any], view: Callable[[], RenderableType]) -> None:
    if opts.output is OutputFormat.table:
        console.print(view())
    else:
        emit(opts, data)


# -- running ---------------------------------------------------------------------------------------------
@contextlib.contextmanager
def _live(opts: GlobalOptions) -> Iterator[Callable[[Progress], None] | None]:
    if not err_console.is_terminal:
        yield None
        return
    with Live(Text("starting..."), console=err_console, transient=True, refresh_per_second=4) as live:
        yield lambda p: live.update(progress_view(p))


def _run_live(cfg: BenchConfig, opts: GlobalOptions) -> BenchResult:
    from infctl.bench import run

    with _live(opts) as progress:
        return run(cfg, progress=progress)


def _sweep(
    cfg: BenchConfig, opts: GlobalOptions, rates: str | None, find: bool, attainment: float
) -> SweepResult | MaxRateResult:
    def announce(rate: float, r: BenchResult) -> None:
        s = r.summary
        good = f", SLO met by {s.good_fraction:.0%}" if s.good_fraction is not None else ""
        err_console.print(f"{rate:g} req/s: {s.request_throughput:.2f} req/s done, TTFT p50 "
                          f"{s.ttft['p50'] * 1e3:.1f} ms{good}", highlight=False)  # fmt: skip

    async def main() -> SweepResult | MaxRateResult:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signal.SIGINT, stop.set)
        with _live(opts) as progress:
            if find:
                first = cfg.load.stages[0].rate
                start = first if first is not None and math.isfinite(first) else 1.0
                return await find_max_rate(
                    cfg, attainment=attainment, start=start, progress=progress, stop=stop, on_run=announce
                )
            return await sweep(cfg, parse_rates(rates or ""), progress=progress, stop=stop, on_run=announce)

    return asyncio.run(main())


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="bench")
