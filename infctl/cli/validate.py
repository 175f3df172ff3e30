"""``infctl validate``: load a profile the way deploy and render will, and say what it describes."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from infctl.cli.context import global_options
from infctl.cli.output import emit, errors_as_exit, kv_table
from infctl.config import AnyProfile, ClusterProfile, DeploymentProfile, ModelProfile, load_profile
from infctl.config.length_pools import describe

EXAMPLES = """
Examples:

  infctl validate -f profiles/deepseek-v3-group.yaml

  infctl validate -f profiles/local-demo.yaml --set replicas=2 --set model.sim.speedup=10

  infctl -o json validate -f profiles/kimi-k2-pool.yaml            # summary for scripts

  infctl -o yaml validate -f profiles/kimi-k2-pool.yaml --resolved # the full profile, defaults filled in

A mistake is reported as FILE:LINE: KEY.PATH: expected ..., found ... (exit code 2).
"""


def validate(
    ctx: typer.Context,
    file: Annotated[Path, typer.Option("-f", "--file", help="Profile: deployment, model or cluster.")],
    overrides: Annotated[
        list[str] | None,
        typer.Option("--set", metavar="KEY.PATH=VALUE", help="Override a key, e.g. groups=3 (repeatable)."),
    ] = None,
    resolved: Annotated[
        bool, typer.Option("--resolved", help="Print the whole profile as loaded, defaults filled in.")
    ] = False,
) -> None:
    """Check a profile and summarise it. References (model: models/x.yaml) are followed and --set overrides
    applied exactly as deploy and render do, so a profile that validates here loads there."""
    opts = global_options(ctx)
    with errors_as_exit():
        profile = load_profile(file, overrides or [])
    if resolved:
        emit(opts, profile.model_dump(mode="json"))
    else:
        emit(opts, summary(profile), table=lambda data: _table(file, data))


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
    data["router"] = f"{p.router.policy} on port {p.router.port}" if p.router.enabled else "disabled"
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
    rows = {k: _cell(v) for k, v in data.items() if k != "kind" and v is not None}
    return kv_table(f"valid {data['kind']}: {file}", rows)


def _cell(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in value.items())
    return str(value)


def register(app: typer.Typer) -> None:
    app.command("validate", epilog=EXAMPLES)(validate)
