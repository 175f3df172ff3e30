"""``infctl validate``: load a profile the way deploy and render will, and say what it describes."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Group
from rich.table import Table

from infctl.cli.context import global_options
from infctl.cli.files import FilesOption, required_files
from infctl.cli.output import emit, errors_as_exit, fail, kv_table, report
from infctl.config import AnyProfile, ClusterProfile, DeploymentProfile, ModelProfile, load_profile
from infctl.config.length_pools import describe
from infctl.errors import ConfigError, InfctlError

EXAMPLES = """
Examples:

  infctl validate -f profiles/deepseek-v3-group.yaml

  infctl validate -f profiles/                     # every profile in the directory (or -f a -f b, or a glob)

  infctl validate -f profiles/local-demo.yaml --set replicas=2 --set model.sim.speedup=10

  infctl -o json validate -f profiles/kimi-k2-pool.yaml            # summary for scripts

  infctl -o yaml validate -f profiles/kimi-k2-pool.yaml --resolved # the full profile, defaults filled in

A mistake is reported as FILE:LINE: KEY.PATH: expected ..., found ... (exit code 2).
"""


def validate(
    ctx: typer.Context,
    files: FilesOption = None,
    paths: Annotated[
        list[Path] | None,
        typer.Argument(
            help="More profiles (what an unquoted -f profiles/*.yaml expands to).", show_default=False
        ),
    ] = None,
    overrides: Annotated[
        list[str] | None,
        typer.Option("--set", metavar="KEY.PATH=VALUE", help="Override a key, e.g. groups=3 (repeatable)."),
    ] = None,
    resolved: Annotated[
        bool, typer.Option("--resolved", help="Print the whole profile as loaded, defaults filled in.")
    ] = False,
) -> None:
    """Check profiles and summarise them. References (model: models/x.yaml) are followed and --set overrides
    applied exactly as deploy and render do, so a profile that validates here loads there.

    Every file named is checked (-f repeated, a directory, a glob); one that fails does not hide the others,
    and any failure makes the exit code 2."""
    opts = global_options(ctx)
    with errors_as_exit():
        targets = required_files([*(files or []), *(paths or [])], command="validate")
    results: list[tuple[Path, Any]] = []
    failures: list[InfctlError] = []
    for path in targets:
        try:
            results.append((path, load_profile(path, overrides or [])))
        except InfctlError as err:
            failures.append(err)
            report(err)
    if resolved:
        data = [p.model_dump(mode="json") for _, p in results]
        emit(opts, data[0] if len(targets) == 1 and data else data)
    elif len(targets) == 1 and results:
        path, profile = results[0]
        emit(opts, summary(profile), table=lambda data: _table(path, data))
    elif results:
        summaries = [{"file": str(path), **summary(profile)} for path, profile in results]
        emit(opts, summaries, table=lambda data: Group(*(_table(Path(d["file"]), d) for d in data)))
    if failures:
        fail(
            ConfigError(f"{len(failures)} of {len(targets)} profiles are invalid", hint="fix the files above")
        )


def summary(profile: AnyProfile) -> dict[str, Any]:
    """What a person checks first, as plain data."""
    if isinstance(profile, ModelProfile):
        return {"kind": "model", **_model_summary(profile)}
    if isinstance(profile, ClusterProfile):
        return {"kind": "cluster", **_cluster_summary(profile)}
    return _deployment_summary(profile)


def _deployment_summary(p: DeploymentProfile) -> dict[str, Any]:
    counts = p.replicas_by_role()
    data: dict[str, Any] = {
        "kind": "deployment",
        "name": p.name,
        "namespace": p.namespace,
        "target": p.target,
        "mode": p.mode,
        "layout": _layout(p),
        "replicas": dict(counts),
        **_model_summary(p.model),
        "cluster": None if p.cluster is None else p.cluster.name,
    }
    if p.target == "kubernetes":
        data["nodes_per_replica"] = p.nodes_per_replica
        data["total_gpus"] = sum(counts.values()) * p.model.gpus_per_replica
    port = (
        f"port {p.router.port}"
        if p.target == "kubernetes" or "port" in p.router.model_fields_set
        else f"the first free port after the engines' (from {p.local.base_port})"
    )
    data["router"] = f"{p.router.policy} on {port}" if p.router.enabled else "disabled"
    data["autoscaler"] = _autoscaler(p)
    return data


def _layout(p: DeploymentProfile) -> str:
    if p.length_pools is not None:
        shapes = [p.group_shape(lp) if p.mode == "group" else None for lp in p.length_pools]
        return "; ".join(describe(lp, p.mode, s) for lp, s in zip(p.length_pools, shapes, strict=True))
    if p.mode == "group" and p.group is not None:
        return f"{p.groups} x (prefill {p.group.prefill} + decode {p.group.decode})"
    if p.mode == "pool" and p.pools is not None:
        return f"prefill pool {p.pools.prefill}, decode pool {p.pools.decode}"
    return f"{p.replicas} aggregated"


def _autoscaler(p: DeploymentProfile) -> str:
    scaler = p.autoscaler
    if not scaler.enabled:
        return "disabled"
    bounds = [
        f"{role} {b.min}..{b.max}"
        for role in ("prefill", "decode", "both")
        if (b := getattr(scaler, role)) is not None
    ]
    if p.length_pools is not None:
        bounds = ["per length pool"]
    zero = scaler.scale_to_zero
    if zero is not None:
        bounds.append(f"to zero after {zero.after_s:g}s idle ({zero.scaler})")
    return ", ".join(bounds) + (" (dry run)" if scaler.dry_run else "")


def _model_summary(m: ModelProfile) -> dict[str, Any]:
    return {
        "engine": m.engine,
        "model": m.model,
        "served_model_name": m.served_model_name,
        "gpus_per_replica": m.gpus_per_replica,
    }


def _cluster_summary(c: ClusterProfile) -> dict[str, Any]:
    return {
        "name": c.name,
        "switch_label": c.switch_label,
        "gpus_per_node": c.gpus_per_node,
        "gpu_resource": c.gpu_resource,
        "rdma_resource": c.rdma_resource,
        "nodes_per_switch": c.nodes_per_switch,
    }


def _table(file: Path, data: dict[str, Any]) -> Table:
    rows = {k: _cell(v) for k, v in data.items() if k not in ("kind", "file") and v is not None}
    table = kv_table(f"valid {data['kind']}: {file}", rows)
    # As wide as its title, so the path stays on one line as people copy it (a title wraps at the table's
    # width, mid-name); a terminal narrower than that still folds it.
    table.min_width = len(f"valid {data['kind']}: {file}")
    return table


def _cell(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in value.items())
    return str(value)


def register(app: typer.Typer) -> None:
    app.command("validate", epilog=EXAMPLES)(validate)
