"""``infctl doctor``: what is wrong with the cluster, the engines, the router or the local target; the fix."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from infctl.cli.context import OutputFormat, global_options
from infctl.cli.output import emit, errors_as_exit
from infctl.config import load_deployment
from infctl.doctor import DEFAULT_TIMEOUT_S, GROUPS, DoctorDeps, build_request, doctor
from infctl.doctor.router_probe import ADMIN_TOKEN_ENV
from infctl.kube import ClientSettings, connect

EXAMPLES = f"""
Examples:

  # the kubectl context's cluster, checked against a profile (CRDs, GPUs under one switch, RBAC)
  infctl doctor -f profiles/deepseek-v3-group.yaml

  # the cluster without a profile; permissions reviewed in namespace inference
  infctl -n inference doctor --cluster

  # engines: health, models, metrics, prefix caching, a tiny completion, KV events
  infctl doctor --engines http://10.0.0.7:8000 --engines http://10.0.0.8:30000,engine=sglang

  # a router: backends, signal freshness, policy
  infctl doctor --router http://127.0.0.1:8000

  # a local release's state, engines and router, as JSON
  infctl doctor --local local-demo -o json

--engines takes URL[,engine=NAME][,model=NAME][,role=ROLE][,kv_events=tcp://HOST:PORT][,dp=N]
(dp: data-parallel ranks behind the URL; rank r's KV events are checked at the port + r).
The router's admin token is read from {ADMIN_TOKEN_ENV}.

Exit codes: 0 every check passed or warned, 1 a check failed, 2 bad input (profile, flags).
"""

STYLES = {"pass": "green", "warn": "yellow", "fail": "bold red", "skip": "dim"}


def doctor_cmd(
    ctx: typer.Context,
    file: Annotated[
        Path | None, typer.Option("-f", "--file", help="Deployment profile to check against.")
    ] = None,
    overrides: Annotated[
        list[str] | None,
        typer.Option("--set", metavar="KEY.PATH=VALUE", help="Override a profile key (repeatable)."),
    ] = None,
    engines: Annotated[
        list[str] | None,
        typer.Option("--engines", metavar="URL[,key=value]", help="An engine to check (repeatable)."),
    ] = None,
    router: Annotated[str | None, typer.Option("--router", metavar="URL", help="A router to check.")] = None,
    cluster: Annotated[
        bool, typer.Option("--cluster", help="Check the kubeconfig's cluster (a kubernetes -f implies it).")
    ] = False,
    local: Annotated[
        str | None, typer.Option("--local", metavar="RELEASE", help="A local release to check.")
    ] = None,
    run_dir: Annotated[
        Path | None, typer.Option("--run-dir", help="Where local releases keep state; default .infctl.")
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", metavar="S", min=0.5, help="Seconds each check may take.")
    ] = DEFAULT_TIMEOUT_S,
    output: Annotated[
        OutputFormat | None, typer.Option("-o", "--output", help="table (default), json or yaml.")
    ] = None,
) -> None:
    """Check a cluster, engines, a router or the local target; print every finding with its fix.

    Checks run concurrently, each within --timeout seconds. A warning does not fail the run; a failure does.
    """
    opts = global_options(ctx)
    if output is not None:
        opts = replace(opts, output=output)
    with errors_as_exit():
        profile = load_deployment(file, overrides or []) if file is not None else None
        request = build_request(
            profile=profile,
            engines=engines or [],
            router=router,
            cluster=cluster,
            local=local,
            run_dir=run_dir,
            namespace=opts.namespace,
            admin_token=os.environ.get(ADMIN_TOKEN_ENV),
        )
        settings = ClientSettings(
            kubeconfig=opts.kubeconfig, context=opts.context, namespace=opts.namespace, timeout_s=timeout
        )
        report = doctor(request, DoctorDeps(kube=lambda: connect(settings)), timeout_s=timeout)
    emit(opts, report.to_dict(), table=report_table)
    raise typer.Exit(report.exit_code)


def report_table(data: dict[str, Any]) -> Table:
    counts = data["counts"]
    verdict = "[green]healthy[/]" if data["ok"] else "[bold red]problems found[/]"
    table = Table(title=f"infctl doctor: {verdict}", title_justify="left", show_lines=False)
    for name, kwargs in (
        ("group", {}),
        ("check", {}),
        ("target", {"overflow": "fold"}),
        ("status", {"no_wrap": True}),
        ("finding", {"ratio": 3}),
        ("fix", {"ratio": 2}),
    ):
        table.add_column(name, **kwargs)
    previous = None
    for r in sorted(data["results"], key=lambda r: GROUPS.index(r["group"])):
        if previous is not None and r["group"] != previous:
            table.add_section()
        previous = r["group"]
        style = STYLES[r["status"]]
        table.add_row(
            r["group"],
            r["name"],
            escape(r["target"]),
            f"[{style}]{r['status']}[/]",
            escape(r["summary"]),
            escape(r["fix"] or ""),
        )
    table.caption = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    return table


def register(app: typer.Typer) -> None:
    app.command("doctor", epilog=EXAMPLES)(doctor_cmd)
