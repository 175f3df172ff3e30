"""``infctl doctor``: what is wrong with the cluster, the engines, the router or the local target; the fix."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Group, RenderableType
from rich.markup import escape
from rich.table import Table

from infctl.cli.context import global_options
from infctl.cli.flags import duration_option, url_option
from infctl.cli.output import emit, errors_as_exit
from infctl.cli.status import RunDirOption
from infctl.config import load_deployment
from infctl.doctor import DEFAULT_TIMEOUT_S, GROUPS, DoctorDeps, build_request, doctor
from infctl.doctor.router_probe import ADMIN_TOKEN_ENV
from infctl.errors import ConfigError
from infctl.kube import ClientSettings, connect

EXAMPLES = f"""
Examples:

  # the kubectl context's cluster, checked against a profile (CRDs, GPUs under one switch, RBAC), and
  # the release's router and autoscaler, found by their Services and read through the API server's proxy
  infctl doctor -f profiles/deepseek-v3-group.yaml

  # the cluster without a profile; permissions reviewed in namespace inference
  infctl -n inference doctor --cluster

  # engines: health, models, metrics, prefix caching, a tiny completion, KV events
  infctl doctor --engine-url http://10.0.0.7:8000 --engine-url http://10.0.0.8:30000,engine=sglang

  # a router: backends, signal freshness, policy
  infctl doctor --router http://127.0.0.1:8000

  # an autoscaler: do replicas of units that scale to 0 start within the router's hold?
  infctl doctor --autoscaler http://127.0.0.1:9464

  # a local release's state, engines and router, as JSON
  infctl doctor --local local-demo -o json

  # every check, not only the problems
  infctl doctor --local local-demo --all

--engine-url takes URL[,engine=NAME][,model=NAME][,role=ROLE][,kv_events=tcp://HOST:PORT][,dp=N]
(dp: data-parallel ranks behind the URL; rank r's KV events are checked at the port + r).
The router's admin token is read from {ADMIN_TOKEN_ENV}.

The table lists failures and warnings, then one summary line; --all lists every check.
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
        url_option("--engine-url", spec=True, help="An engine to check (repeatable)."),
    ] = None,
    router: Annotated[str | None, url_option("--router", help="A router to check.")] = None,
    autoscaler: Annotated[
        str | None,
        url_option("--autoscaler", help="An autoscaler's /metrics server to check."),
    ] = None,
    cluster: Annotated[
        bool, typer.Option("--cluster", help="Check the kubeconfig's cluster (a kubernetes -f implies it).")
    ] = False,
    local: Annotated[
        str | None, typer.Option("--local", metavar="RELEASE", help="A local release to check.")
    ] = None,
    run_dir: RunDirOption = None,
    timeout: Annotated[
        float, duration_option("--timeout", help="Time each check may take (at least 500ms).")
    ] = DEFAULT_TIMEOUT_S,
    show_all: Annotated[
        bool, typer.Option("--all", help="Every check in the table, passed and skipped ones too.")
    ] = False,
) -> None:
    """Check a cluster, engines, a router, an autoscaler or the local target; print problems and fixes.

    Checks run concurrently, each within --timeout. The table shows failures and warnings and one summary
    line (--all: every check); -o json/yaml give every check. A warning does not fail the run; a failure
    does."""
    opts = global_options(ctx)
    with errors_as_exit():
        if timeout < 0.5:
            raise ConfigError(f"--timeout {timeout:g}s: at least 500ms", hint="--timeout 5s")
        profile = load_deployment(file, overrides or []) if file is not None else None
        request = build_request(
            profile=profile,
            engines=engines or [],
            router=router,
            autoscaler=autoscaler,
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
    emit(opts, report.to_dict(), table=lambda data: report_view(data, show_all=show_all))
    raise typer.Exit(report.exit_code)


def summary_line(data: dict[str, Any]) -> str:
    """``infctl doctor: healthy (34 passed, 2 skipped)`` or ``... 1 failed, 2 warnings ...``."""
    counts = data["counts"]
    verdict = "[green]healthy[/]" if data["ok"] else "[bold red]problems found[/]"
    words = {"pass": "passed", "warn": "warned", "fail": "failed", "skip": "skipped"}
    parts = ", ".join(f"{n} {words.get(s, s)}" for s, n in counts.items() if n)
    return f"infctl doctor: {verdict} ({parts or 'nothing checked'})"


def report_view(data: dict[str, Any], *, show_all: bool = False) -> RenderableType:
    """The problems (every check with ``show_all``) and the summary line."""
    shown = data["results"] if show_all else [r for r in data["results"] if r["status"] in ("fail", "warn")]
    if not shown:
        return summary_line(data) + ("" if show_all else "  [dim](--all lists every check)[/]")
    return Group(report_table({**data, "results": shown}), summary_line(data))


def report_table(data: dict[str, Any]) -> Table:
    table = Table(title="infctl doctor", title_justify="left", show_lines=False)
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
    return table


def register(app: typer.Typer) -> None:
    app.command("doctor", epilog=EXAMPLES)(doctor_cmd)
