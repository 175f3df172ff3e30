"""``infctl autoscaler``: scale prefill, decode and whole groups on queue length, KV usage and TTFT."""

from __future__ import annotations

import json
import math
import time
from dataclasses import fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.markup import escape

from infctl.autoscaler.daemon import AutoscalerConfig, run
from infctl.autoscaler.settings import PolicyConfig
from infctl.autoscaler.setup import Options, build
from infctl.autoscaler.snapshot import Decision, ScalingSnapshot
from infctl.cli.context import OutputFormat, global_options
from infctl.cli.flags import DryRunMode, DryRunOption, duration_option, field_help, url_option
from infctl.cli.output import console, err_console, errors_as_exit
from infctl.cli.status import RunDirOption
from infctl.config.settings import ScalingOptions

EXAMPLES = """
Examples:

  # A local release scaled at runtime (its supervisor runs an autoscaler; local profiles ship with it off)
  infctl deploy -f profiles/local-demo.yaml --detach --set autoscaler.enabled=true \\
      --set autoscaler.both.min=1 --set autoscaler.both.max=4

  # Beside it, what other settings would decide, recommendations only: the same bounds (--set as at
  # deploy), a night floor, pre-warming before 09:00 and TTFT as a signal (PD: --ratio 0.25:1 too)
  infctl autoscaler -f profiles/local-demo.yaml --set autoscaler.enabled=true --set autoscaler.both.min=1 \\
      --set autoscaler.both.max=4 --dry-run --interval 5s \\
      --schedule "00:00-07:00 min=1" --schedule "07:30-09:00 min=4" --ttft-slo 2s

  # In a cluster: the file `infctl render` puts in the autoscaler's ConfigMap
  infctl autoscaler -f /etc/infctl/autoscaler.yaml --prometheus http://prometheus.monitoring:9090

Metrics (infctl_autoscaler_*) and /health are served on --host:--port. With -o json each printed
decision is one JSON line (time, unit, current, desired, changed, reason, inputs); -o yaml, one document.
"""


_POLICY_DEFAULTS = {f.name: f.default for f in fields(PolicyConfig)}


def _default(name: str) -> str:
    """``Default 300s.``: a policy setting's default, read from ``PolicyConfig`` (declared there once)."""
    return f"Default {_POLICY_DEFAULTS[name]:g}{'s' if name.endswith('_s') else ''}."


def autoscaler(
    ctx: typer.Context,
    file: Annotated[
        Path | None, typer.Option("-f", "--file", help="Deployment profile, or autoscaler.yaml.")
    ] = None,
    overrides: Annotated[
        list[str] | None,
        typer.Option("--set", metavar="KEY.PATH=VALUE", help="Override a profile key, as deploy --set."),
    ] = None,
    router: Annotated[str | None, url_option("--router", help="Router URL (queue depth, TTFT).")] = None,
    dry_run: DryRunOption = DryRunMode.none,
    interval: Annotated[
        float | None, duration_option("--interval", help=field_help(ScalingOptions, "interval_s"))
    ] = None,
    schedule: Annotated[
        list[str] | None,
        typer.Option(
            "--schedule", metavar="'HH:MM-HH:MM min=N [unit=U]'", help="A time-of-day floor (repeatable)."
        ),
    ] = None,
    ratio: Annotated[
        str | None,
        typer.Option("--ratio", metavar="LOW:HIGH", help="Band of prefill replicas per decode replica."),
    ] = None,
    ttft_slo: Annotated[
        float | None, duration_option("--ttft-slo", help="Scale up while TTFT p99 exceeds this (2s).")
    ] = None,
    up_window: Annotated[
        float | None,
        duration_option("--up-window", help=f"High this long before up. {_default('up_window_s')}"),
    ] = None,
    down_window: Annotated[
        float | None,
        duration_option("--down-window", help=f"Low this long before down. {_default('down_window_s')}"),
    ] = None,
    up_cooldown: Annotated[
        float | None,
        duration_option("--up-cooldown", help=f"Wait after a change before up. {_default('up_cooldown_s')}"),
    ] = None,
    down_cooldown: Annotated[
        float | None,
        duration_option(
            "--down-cooldown", help=f"Wait after a change before down. {_default('down_cooldown_s')}"
        ),
    ] = None,
    max_step_up: Annotated[
        int | None, typer.Option("--max-step-up", help=f"Units added at once. {_default('max_step_up')}")
    ] = None,
    max_step_down: Annotated[
        int | None,
        typer.Option("--max-step-down", help=f"Units removed at once. {_default('max_step_down')}"),
    ] = None,
    prometheus: Annotated[str | None, url_option("--prometheus", help="Read engine signals here.")] = None,
    selector: Annotated[
        list[str] | None,
        typer.Option("--selector", metavar="LABEL=VALUE", help="Prometheus series matcher (repeatable)."),
    ] = None,
    control_url: Annotated[
        str | None,
        url_option("--control-url", help="A local supervisor's control endpoint (default: from -f's state)."),
    ] = None,
    run_dir: RunDirOption = None,
    time_scale: Annotated[
        float,
        typer.Option("--time-scale", help="Wall seconds per policy second (simulated engines run faster)."),
    ] = 1.0,
    host: Annotated[
        str | None,
        typer.Option(
            "--host", help=f"Metrics listen address. Default: the file's host, else {AutoscalerConfig.host}."
        ),
    ] = None,
    port: Annotated[
        int | None,
        typer.Option(
            "--port",
            help=f"Metrics port (/metrics, /health). Default: the file's port, else {AutoscalerConfig.port}.",
        ),
    ] = None,
    memory_file: Annotated[
        Path | None,
        typer.Option(
            "--memory-file",
            help="Keep cooldowns and the forecast here across restarts (default: the file's ConfigMap).",
        ),
    ] = None,
    layout: Annotated[str | None, typer.Option("--layout", hidden=True)] = None,
) -> None:
    """Watch the engines and the router, decide how many replicas each role (or group) needs, and scale.

    Every decision is printed with its reason when it changes something (every one with --dry-run)."""
    opts = global_options(ctx)
    policy: dict[str, Any] = {
        k: v
        for k, v in {
            "ttft_slo_s": ttft_slo,
            "up_window_s": up_window,
            "down_window_s": down_window,
            "up_cooldown_s": up_cooldown,
            "down_cooldown_s": down_cooldown,
            "max_step_up": max_step_up,
            "max_step_down": max_step_down,
        }.items()
        if v is not None
    }
    kube = {"kubeconfig": opts.kubeconfig, "context": opts.context, "namespace": opts.namespace}
    with errors_as_exit():
        cfg, actuator = build(
            Options(
                file=file,
                overrides=tuple(overrides or ()),
                layout=layout,
                local=control_url,
                run_dir=run_dir,
                router=router,
                prometheus=prometheus,
                selector=tuple(selector or ()),
                dry_run=dry_run is not DryRunMode.none,
                interval=interval,
                time_scale=time_scale,
                schedules=tuple(schedule or ()),
                ratio=ratio,
                policy=policy,
                host=host,
                port=port,
                kube=kube,
                memory_file=memory_file,
            )
        )
        units = ", ".join(f"{u.name} {u.min}..{u.max}" for u in cfg.policy.units)
        mode = "dry run: recommendations only" if cfg.dry_run else "scaling"

        def announce(url: str | None) -> None:  # once listening: the port bound, and nothing if it cannot
            where = f"; metrics on {url}/metrics" if url else ""
            line = f"infctl autoscaler ({mode}) every {cfg.interval_s:g}s: {units}{where}"
            err_console.print(line, highlight=False, soft_wrap=True)

        fmt = opts.output

        def show(d: Decision, s: ScalingSnapshot) -> None:
            if fmt is OutputFormat.table:
                _print(d, s, every=cfg.dry_run)
            else:
                _emit(d, every=cfg.dry_run, fmt=fmt)

        run(
            cfg,
            actuator,
            on_decision=show,
            on_listening=announce,
            on_recall=lambda said: err_console.print(said, highlight=False, soft_wrap=True),
        )


def _emit(decision: Decision, *, every: bool, fmt: OutputFormat) -> None:
    """Each printed decision as one JSON line (``-o json``) or YAML document (``-o yaml``), for scripts."""
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    for rec in decision.recommendations:
        if not (every or rec.changed):
            continue
        row = {
            "time": stamp,
            "unit": rec.role,
            "current": rec.current,
            "desired": rec.desired,
            "changed": rec.changed,
            "reason": rec.reason,
            # NaN (no TTFT this interval) is not JSON: null.
            "inputs": {k: (v if math.isfinite(v) else None) for k, v in rec.inputs},
        }
        if fmt is OutputFormat.json:
            text = json.dumps(row, separators=(",", ":"))
        else:
            text = "---\n" + yaml.safe_dump(row, sort_keys=False).rstrip()
        print(text, flush=True)


def _print(decision: Decision, snap: ScalingSnapshot, *, every: bool) -> None:
    stamp = time.strftime("%H:%M:%S")
    for rec in decision.recommendations:
        if not (every or rec.changed):
            continue
        inputs = dict(rec.inputs)
        seen = (
            f"ready {inputs['ready']:.0f} pending {inputs['pending']:.0f} "
            f"q/r {inputs['queue_per_replica']:.2f} kv {inputs['kv_usage']:.0%}"
        )
        arrow = "[green]->[/]" if rec.desired > rec.current else "[yellow]->[/]" if rec.changed else "=="
        console.print(
            f"{stamp} {rec.role} {rec.current} {arrow} {rec.desired}  {escape(rec.reason)}  [dim]({seen})[/]",
            highlight=False,
            soft_wrap=True,
        )


def register(app: typer.Typer) -> None:
    app.command(name="autoscaler", epilog=EXAMPLES)(autoscaler)
