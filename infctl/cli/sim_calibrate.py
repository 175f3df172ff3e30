"""``infctl sim calibrate``: fit a simulator profile to a real engine (TTFT against prompt length, ITL against
batch size)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from infctl.cli.context import OutputFormat, global_options
from infctl.cli.files import check_writable
from infctl.cli.flags import url_option
from infctl.cli.output import emit, err_console, errors_as_exit
from infctl.errors import ConfigError
from infctl.sim.calib_profile import write_profile_file
from infctl.sim.calibrate import Calibration, CalibrationSettings, calibrate

EPILOG = """
[bold]Examples[/]

  [dim]# fit a profile to the vLLM on :8000 and run a simulated engine with it[/]
  infctl sim calibrate --url http://127.0.0.1:8000 --out tiny-cpu.yaml --name tiny-cpu
  infctl sim --profile tiny-cpu.yaml

  [dim]# a quicker, rougher fit (fewer repeats and points)[/]
  infctl sim calibrate --url http://127.0.0.1:8000 --quick -o json
"""


def calibrate_command(
    ctx: typer.Context,
    url: Annotated[
        str, url_option("--url", help="Base URL of the engine to measure, e.g. http://127.0.0.1:8000.")
    ],
    out: Annotated[
        Path | None,
        typer.Option(help="Write the profile here (.json: JSON, else YAML); default: print only."),
    ] = None,
    name: Annotated[str, typer.Option(help="Name of the profile.")] = "calibrated",
    model: Annotated[
        str | None, typer.Option(help="Served model; default: the first /v1/models lists.")
    ] = None,
    prompt_lengths: Annotated[
        str | None, typer.Option(help="Comma list of prompt lengths (tokens) whose TTFT is measured.")
    ] = None,
    batch_sizes: Annotated[
        str | None, typer.Option(help="Comma list of concurrent stream counts whose ITL is measured.")
    ] = None,
    repeats: Annotated[int | None, typer.Option(min=1, help="Lone requests per prompt length.")] = None,
    max_num_batched_tokens: Annotated[
        int, typer.Option(min=1, help="The engine's step token budget (vLLM on CPU: 2048).")
    ] = CalibrationSettings.max_num_batched_tokens,
    max_num_seqs: Annotated[
        int, typer.Option(min=1, help="The engine's batch limit (vLLM on CPU: 128).")
    ] = CalibrationSettings.max_num_seqs,
    quick: Annotated[
        bool, typer.Option("--quick", help="Fewer points and repeats: a rough fit in ~1/4 the time.")
    ] = False,
    compensate: Annotated[
        bool,
        typer.Option(
            "--compensate/--no-compensate",
            help="Also measure a simulated engine serving the fit, and correct for its own latency.",
        ),
    ] = True,
) -> None:
    """Measure a real engine (TTFT against prompt length, ITL against batch size); fit a simulator profile."""
    opts = global_options(ctx)
    with errors_as_exit():
        check_writable("--out", out)
        fields: dict[str, Any] = {
            "url": url,
            "model": model,
            "name": name,
            "max_num_batched_tokens": max_num_batched_tokens,
            "max_num_seqs": max_num_seqs,
            "compensate": compensate,
        }
        if quick:
            fields.update(
                prompt_lengths=(16, 512, 1280, 2048),
                ttft_repeats=3,
                batch_sizes=(1, 4, 16),
                itl_repeats=1,
                warmup_requests=2,
            )
        if prompt_lengths is not None:
            fields["prompt_lengths"] = _int_list("--prompt-lengths", prompt_lengths)
        if batch_sizes is not None:
            fields["batch_sizes"] = _int_list("--batch-sizes", batch_sizes)
        if repeats is not None:
            fields["ttft_repeats"] = repeats
        settings = CalibrationSettings(**fields)
        quiet = opts.output is not OutputFormat.table
        result = asyncio.run(calibrate(settings, progress=None if quiet else _progress))
        if out is not None:
            write_profile_file(out, result.profile, result.metadata(settings))
        summary = {
            "profile": result.profile.name,
            "written": None if out is None else str(out),
            "coefficients_us": {k: round(v, 3) for k, v in result.fit.coefficients.items()},
            **result.metadata(settings),
        }
        emit(opts, summary, table=lambda _: _calibration_table(result, out))


def _progress(message: str) -> None:
    err_console.print(f"[dim]{message}[/]", highlight=False)


def _int_list(flag: str, raw: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in raw.split(",") if v.strip())
    except ValueError:
        values = ()
    if not values or min(values) < 1:
        raise ConfigError(
            f"{flag} {raw!r}: expected a comma list of positive integers", hint=f"{flag} 16,256,1024"
        )
    return values


def _calibration_table(result: Calibration, out: Path | None) -> Table:
    written = f" -> {out}" if out is not None else " (not written: pass --out FILE)"
    table = Table(
        title=f"profile {result.profile.name}{written}; fit by {result.fit.solver}", title_justify="left"
    )
    for col in ("sample", "measured ms", "fitted ms", "error"):
        table.add_column(col, justify="left" if col == "sample" else "right")
    for r in result.fit.rows:
        label = f"TTFT {r.x:g} tokens" if r.kind == "ttft" else f"ITL batch {r.x:g}"
        table.add_row(label, f"{r.measured_s * 1e3:.2f}", f"{r.predicted_s * 1e3:.2f}", f"{r.rel_error:+.1%}")
    coefficients = ", ".join(f"{k} {v:.3g}" for k, v in result.fit.coefficients.items())
    table.caption = f"{coefficients}; measured in {result.seconds:.0f} s"
    return table


def register(app: typer.Typer) -> None:
    """Add ``calibrate`` to the ``sim`` group."""
    app.command("calibrate", epilog=EPILOG)(calibrate_command)
