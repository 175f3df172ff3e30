"""``infctl cutover``: move traffic from the old system to the new one, in steps, behind SLO gates."""

from __future__ import annotations

import asyncio
import getpass
import os
import socket
import time
from dataclasses import replace
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from infctl.cli.context import GlobalOptions, OutputFormat, global_options
from infctl.cli.flags import DryRunMode, DryRunOption, client_side, url_option
from infctl.cli.output import emit, err_console, errors_as_exit, simple_table
from infctl.cutover import (
    Plan,
    SystemClock,
    Target,
    WalkOptions,
    WalkSettings,
    load,
    open_target,
    parse_duration,
    parse_gates,
    parse_steps,
    pause,
    resume,
    rollback,
    set_percent,
    status_dict,
    walk,
)
from infctl.cutover.backends import ADMIN_TOKEN_ENV
from infctl.cutover.plan import format_duration
from infctl.errors import ConfigError
from infctl.kube import ClientSettings, connect

app = typer.Typer(
    name="cutover",
    help="Move traffic from the old serving system to the new one, a percentage at a time, behind SLO gates.",
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
)

EXAMPLES = f"""
[bold]Examples[/]

  [dim]# where the split stands: share, walk, next step, history (state lives on the router or route)[/]
  infctl cutover status --router http://127.0.0.1:8000

  [dim]# send 40% to the router's "new" upstream group now (idempotent; --dry-run shows the write)[/]
  infctl cutover --router http://127.0.0.1:8000 --percent 40

  [dim]# walk 2,5,10,20,40% every 10 minutes; a failed gate rolls back to the last good step[/]
  infctl cutover --router http://127.0.0.1:8000 --plan 2,5,10,20,40 --interval 10m \\
      --gate "ttft_p99<2s,error_rate<1%,ttft_p90<old*1.2"

  [dim]# a Gateway API HTTPRoute rendered by infctl (new: qwen3-8b-router, old: the other backendRef),
  # gates from Prometheus over every router replica[/]
  infctl cutover --httproute qwen3-8b -n inference --plan 5,25,50,100 --interval 15m \\
      --gate "error_rate<0.5%,throttle_rate<1%" --prometheus http://prometheus.monitoring:9090 \\
      --gate-new default --gate-old legacy

  [dim]# stop a walk where it stands, continue it, or send everything back to the old system[/]
  infctl cutover --router http://127.0.0.1:8000 --pause
  infctl cutover --router http://127.0.0.1:8000 --resume
  infctl cutover --router http://127.0.0.1:8000 --rollback

Gates: ttft_p50/p90/p99 (ms, s), error_rate, throttle_rate (%, or a fraction); a bound is absolute or
relative to old in the same window (old*1.2, old+50ms). A window with under --min-requests requests to new
holds the walk; a new group taking far less than its share (ejected, down) fails it.
Writes carry the version read: a concurrent change is refused, naming who made it, never overwritten.
The router's admin token is read from {ADMIN_TOKEN_ENV}.
Exit codes: 0 done (or nothing to do), 1 error, 2 bad input, 3 the walk rolled back, 4 changed concurrently.
"""

_T, _A, _W, _G = "Target", "Action", "Walk", "Gate metrics"
_META = "infctl.cutover.target"


def _opt(*names: str, help: str, panel: str | None = None, **kw: Any) -> Any:
    return typer.Option(*names, help=help, rich_help_panel=panel, **kw)


Router = Annotated[
    str | None, url_option("--router", help="infctl router: the split is its weighted upstream groups.",
                           rich_help_panel=_T),
]  # fmt: skip
Route = Annotated[
    str | None, _opt("--httproute", metavar="NAME", help="Gateway API HTTPRoute: weights on its backendRefs.",
                     panel=_T),
]  # fmt: skip
Namespace = Annotated[str | None, _opt("-n", "--namespace", help="The HTTPRoute's namespace.", panel=_T)]
Old = Annotated[
    str | None, _opt("--old", help="Old system's upstream group or backendRef (default: stored, else old).",
                     panel=_T),
]  # fmt: skip
New = Annotated[
    str | None, _opt("--new", help="New system's upstream group or backendRef (default: stored, else new; "
                     "on a route infctl rendered, its *-router or *-pool).", panel=_T),
]  # fmt: skip
Output = Annotated[OutputFormat | None, _opt("-o", "--output", help="table, json or yaml.")]
Percent = Annotated[
    int | None, _opt("--percent", min=0, max=100, help="Set the new system's share now (ends any walk).",
                     panel=_A),
]  # fmt: skip
Steps = Annotated[
    str | None, _opt("--plan", metavar="STEPS", help="Walk these shares: 2,5,10,20,40.", panel=_A)
]
Pause = Annotated[bool, _opt("--pause", help="Stop a walk where it stands.", panel=_A)]
Resume = Annotated[bool, _opt("--resume", help="Continue a paused or rolled-back walk.", panel=_A)]
Rollback = Annotated[bool, _opt("--rollback", help="Everything back to the old system now.", panel=_A)]
Interval = Annotated[str, _opt("--interval", help="Time at each step before its gates are read.", panel=_W)]
Gates = Annotated[
    str, _opt("--gate", metavar="GATES", help="SLO gates: ttft_p99<2s,error_rate<1%.", panel=_W)
]
MinRequests = Annotated[
    int, _opt("--min-requests", min=1, help="Fewer requests to new in a window: hold.", panel=_W)
]
Prometheus = Annotated[
    str | None, url_option("--prometheus", help="Read the gates from Prometheus.", rich_help_panel=_G)
]
Selector = Annotated[
    str, _opt("--prometheus-selector", metavar="MATCHERS", help='Extra matchers: namespace="inference".',
              panel=_G),
]  # fmt: skip
MetricsURL = Annotated[
    str | None, url_option("--metrics-url", help="Router whose /metrics feed the gates (default --router).",
                           rich_help_panel=_G),
]  # fmt: skip
GateOld = Annotated[str | None, _opt("--gate-old", help="Old's upstream label in the metrics.", panel=_G)]
GateNew = Annotated[str | None, _opt("--gate-new", help="New's upstream label in the metrics.", panel=_G)]
DryRun = DryRunOption  # client: show what would be written; the router and routes have no server dry run
Actor = Annotated[
    str | None, _opt("--actor", help="You, in the history (default $INFCTL_ACTOR or user@host).")
]


@app.callback(invoke_without_command=True, epilog=EXAMPLES)
def cutover(
    ctx: typer.Context, router: Router = None, httproute: Route = None, namespace: Namespace = None,
    old: Old = None, new: New = None, percent: Percent = None, plan: Steps = None, pause_: Pause = False,
    resume_: Resume = False, rollback_: Rollback = False, interval: Interval = "10m", gate: Gates = "",
    min_requests: MinRequests = 20, prometheus: Prometheus = None, prometheus_selector: Selector = "",
    metrics_url: MetricsURL = None, gate_old: GateOld = None, gate_new: GateNew = None,
    dry_run: DryRun = DryRunMode.none, actor: Actor = None, output: Output = None,
) -> None:  # fmt: skip
    """Set, walk, pause, resume or roll back the split; with no action, show its status."""
    if ctx.invoked_subcommand is not None:
        # `infctl cutover --router URL status`: the target given before the subcommand counts too.
        ctx.meta[_META] = {"router": router, "httproute": httproute, "namespace": namespace, "old": old,
                           "new": new, "output": output}  # fmt: skip
        return
    opts = _opts(ctx, output, namespace)
    flags = (("--percent", percent is not None), ("--plan", plan is not None), ("--pause", pause_),
             ("--resume", resume_), ("--rollback", rollback_))  # fmt: skip
    chosen = [name for name, on in flags if on]
    with errors_as_exit():
        if len(chosen) > 1:
            raise ConfigError(f"{' and '.join(chosen)}: one action at a time", hint="see infctl cutover -h")
        target = Target(router, httproute, opts.namespace, prometheus, prometheus_selector, metrics_url,
                        os.environ.get(ADMIN_TOKEN_ENV))  # fmt: skip
        target.check()
        walk_opts = WalkOptions(min_requests, gate_old=gate_old, gate_new=gate_new)
        settings = None
        if plan is not None:
            settings = WalkSettings(Plan(parse_steps(plan), parse_duration(interval)), gate, walk_opts)
            if parse_gates(gate) and not target.has_metrics:
                raise ConfigError("--gate needs metrics", hint="add --prometheus URL or --metrics-url ROUTER")
        action = chosen[0].lstrip("-") if chosen else "status"
        args = {"old": old, "new": new, "percent": percent, "settings": settings, "walk_opts": walk_opts,
                "dry_run": client_side(dry_run, what="a traffic split"),
                "actor": actor or default_actor()}  # fmt: skip
        data, code = _run(opts, target, action, args)
    emit(opts, data, table=result_table)
    raise typer.Exit(code)


@app.command("status", epilog="Example: infctl cutover status --httproute qwen3-8b -n inference -o json")
def status(
    ctx: typer.Context, router: Router = None, httproute: Route = None, namespace: Namespace = None,
    old: Old = None, new: New = None, output: Output = None,
) -> None:  # fmt: skip
    """The current split, the walk (phase, plan, gates, next step) and the history."""
    given = ctx.meta.get(_META, {})
    router, httproute, old, new = (router or given.get("router"), httproute or given.get("httproute"),
                                   old or given.get("old"), new or given.get("new"))  # fmt: skip
    opts = _opts(ctx, output or given.get("output"), namespace or given.get("namespace"))
    with errors_as_exit():
        target = Target(router, httproute, opts.namespace, token=os.environ.get(ADMIN_TOKEN_ENV))
        data, _ = _run(opts, target, "status", {"old": old, "new": new})
    emit(opts, data, table=result_table)


def default_actor() -> str:
    return os.environ.get("INFCTL_ACTOR") or f"{getpass.getuser()}@{socket.gethostname()}"


def _opts(ctx: typer.Context, output: OutputFormat | None, namespace: str | None) -> GlobalOptions:
    opts = global_options(ctx)
    return replace(opts, output=output or opts.output, namespace=namespace or opts.namespace)


Result = tuple[dict[str, Any], int]
"""What to print, and the exit code."""


def _run(opts: GlobalOptions, target: Target, action: str, args: dict[str, Any]) -> Result:
    settings = ClientSettings(kubeconfig=opts.kubeconfig, context=opts.context, namespace=opts.namespace)
    try:
        return asyncio.run(_act(target, action, args, lambda: connect(settings)))
    except KeyboardInterrupt:
        err_console.print("interrupted: the split stays where it is; `infctl cutover --resume` continues")
        raise typer.Exit(130) from None


async def _act(target: Target, action: str, a: dict[str, Any], kube: Any) -> Result:
    clock = SystemClock()
    async with open_target(target, kube_connect=kube) as (backend, sources):
        if action == "status":
            return status_dict(await load(backend, a["old"], a["new"])), 0
        common = {"old": a["old"], "new": a["new"], "dry_run": a["dry_run"]}
        if action == "plan":
            report = await walk(backend, sources, a["settings"], actor=a["actor"], clock=clock,
                                on_event=progress, **common)  # fmt: skip
            return report.to_dict(), 3 if report.outcome == "rolled-back" else 0
        if action == "resume":
            done = await resume(backend, sources, actor=a["actor"], clock=clock, options=a["walk_opts"],
                                on_event=progress, **common)  # fmt: skip
            data = done.to_dict()
            return data, 3 if data.get("outcome") == "rolled-back" else 0
        now = clock.now()
        if action == "percent":
            done = await set_percent(backend, a["percent"], now=now, actor=a["actor"], **common)
            return done.to_dict(), 0
        fn = pause if action == "pause" else rollback
        return (await fn(backend, now=now, actor=a["actor"], **common)).to_dict(), 0


def progress(kind: str, data: dict[str, Any]) -> None:
    """The walk's live progress, on stderr (stdout stays for the result)."""
    at = time.strftime("%H:%M:%S")
    if kind == "start":
        how = "resuming" if data["resumed"] else "walking"
        steps = ", ".join(f"{p}%" for _, p in data["timeline"]) or "no steps left"
        msg = f"{how} at {data['percent']}% ({steps}); gates: {data['gates'] or 'none'}"
    elif kind == "wait":
        msg = f"at {data['percent']}%: reading the gates in {format_duration(data['seconds'])}"
    elif kind == "window":
        marks = {True: "[green]ok[/]", False: "[bold red]FAIL[/]", None: "[yellow]?[/]"}
        gates = "; ".join(f"{marks[g['passed']]} {escape(g['detail'])}" for g in data["gates"]) or "no gates"
        style = {"rollback": "bold red", "hold": "yellow"}.get(data["decision"], "green")
        msg = f"{gates} -> [{style}]{data['decision']}[/] {data['next_percent']}%"
    else:
        msg = f"[yellow]stopped:[/] {escape(data['reason'])}"
    err_console.print(f"[dim]{at}[/] {msg}", highlight=False, soft_wrap=True)


def result_table(data: dict[str, Any]) -> Table:
    w = data["weights"]
    split = " / ".join(f"{k} {v:g}" for k, v in w.items())
    head = f"{data['where']}: [bold]{data['percent']}%[/] to {data['new']} ({split})"
    if data.get("dry_run"):
        head = "[yellow]dry run, nothing written:[/] " + head
    elif data.get("changed") is False:
        head += " [dim](already so: nothing written)[/]"
    walk_line = f"phase {data['phase']}" + (" [yellow](paused)[/]" if data["paused"] else "")
    if data["plan"] and data["phase"] in ("walking", "complete", "rolled-back"):
        walk_line += f", plan {','.join(map(str, data['plan']))} every {format_duration(data['interval_s'])}"
        walk_line += f", gates {data['gates'] or 'none'}"
    if data["next_step"] is not None:
        walk_line += f", next step {data['next_step']}%"
    if data.get("outcome"):
        walk_line += f"\nwalk {data['outcome']}: {escape(data['reason'])}"
    if data.get("drift"):
        walk_line += f"\n[yellow]{escape(data['drift'])}[/]"
    if data.get("note"):
        walk_line += f"\n[yellow]{escape(data['note'])}[/]"
    rows = [(e["time"], e["actor"], e["action"], f"{e['previous']}% -> {e['percent']}%", e.get("reason", ""))
            for e in data["history"][-10:]]  # fmt: skip
    table = simple_table(f"{head}\n{walk_line}", ["time", "actor", "action", "share", "reason"], rows)
    if len(data["history"]) > 10:
        table.caption = f"last 10 of {len(data['history'])} history entries (-o json for all)"
    return table


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="cutover")
