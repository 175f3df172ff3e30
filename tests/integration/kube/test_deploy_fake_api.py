"""``infctl deploy`` against a fake API server over HTTP: request contract, order, wait, prune, errors."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from conftest import FakeCluster

from infctl.config import load_deployment
from infctl.kube import (
    APPLY_PATCH,
    ApplyConflictError,
    DeployOptions,
    MissingCRDError,
    NotReadyError,
    delete_release,
    deploy_release,
    diff_release,
    patch_httproute_weights,
    release_status,
    scale,
)
from infctl.manifests import RenderOptions, render

ROOT = Path(__file__).resolve().parents[3]
QWEN = ROOT / "profiles" / "qwen3-8b-aggregated.yaml"
KIMI = ROOT / "profiles" / "kimi-k2-pool.yaml"
FAST = DeployOptions(interval_s=0.01, timeout_s=5)


def objects(path: Path = QWEN, *overrides: str) -> list[dict[str, Any]]:
    return render(load_deployment(path, list(overrides)), RenderOptions())


async def deploy(cluster: FakeCluster, objs: list[dict[str, Any]], **options: Any) -> Any:
    opts = DeployOptions(**{"interval_s": 0.01, "timeout_s": 5, **options})
    events: list[tuple[str, Any]] = []
    release = objs[0]["metadata"]["labels"]["infctl.io/release"]
    report = await asyncio.to_thread(
        deploy_release, cluster.client, objs, release=release, namespace="inference", options=opts,
        on_event=lambda k, d: events.append((k, d)),
    )  # fmt: skip
    return report, events


def applies(cluster: FakeCluster) -> list[Any]:
    return [
        r for r in cluster.api if r.method.value == "PATCH" and r.headers.get("Content-Type") == APPLY_PATCH
    ]


async def test_apply_contract_order_and_namespace(cluster: FakeCluster) -> None:
    objs = objects()
    report, events = await deploy(cluster, objs)
    assert report.namespace_created
    assert cluster.api.namespace_calls == [("GET", ""), ("POST", "")]
    assert cluster.api.namespaces["inference"]["metadata"]["labels"] == {
        "app.kubernetes.io/managed-by": "infctl"
    }
    patches = applies(cluster)
    assert len(patches) == len(objs)
    for req in patches:
        assert req.params["fieldManager"] == "infctl" and req.params["force"] == "false"
    paths = [r.url.path for r in patches]
    assert paths[0] == "/api/v1/namespaces/inference/serviceaccounts/qwen3-8b-router"
    assert "/apis/apps/v1/namespaces/inference/deployments/qwen3-8b-engine" in paths
    assert "/apis/gateway.networking.k8s.io/v1/namespaces/inference/httproutes/qwen3-8b" in paths
    assert "/apis/monitoring.coreos.com/v1/namespaces/inference/prometheusrules/qwen3-8b" in paths
    order = [p.rsplit("/", 2)[-2] for p in paths]
    assert order.index("deployments") < order.index("httproutes") < order.index("prometheusrules")
    phases = [d for k, d in events if k == "phase"]
    assert phases == ["rbac and config", "engines", "router", "autoscaler", "traffic", "monitoring"]
    assert {a.action for a in report.applied} == {"created"}


async def test_waits_for_engines_before_the_router(cluster: FakeCluster) -> None:
    cluster.api.ready_after = 3
    report, events = await deploy(cluster, objects())
    first_router = next(i for i, (k, d) in enumerate(events) if k == "applied" and d.name == "qwen3-8b-router"
                        and d.kind == "Deployment")  # fmt: skip
    waits = [i for i, (k, d) in enumerate(events) if k == "waiting" and d[0].name == "qwen3-8b-engine"]
    assert waits and max(waits) < first_router
    assert events[max(waits)][1][0].ready is not False
    assert all(r.ready for r in report.readiness)


async def test_not_ready_within_timeout_exits_5(cluster: FakeCluster) -> None:
    cluster.api.ready_after = None
    with pytest.raises(NotReadyError) as err:
        await deploy(cluster, objects(), timeout_s=0.1)
    assert err.value.exit_code == 5 and "Deployment/qwen3-8b-engine (0/4 available)" in err.value.message


async def test_prunes_what_is_no_longer_rendered(cluster: FakeCluster) -> None:
    await deploy(cluster, objects())
    before = len(cluster.api)
    report, _ = await deploy(cluster, objects(QWEN, "autoscaler.enabled=false", "autoscaler.both=null"))
    kinds = ["ConfigMap", "Deployment", "Role", "RoleBinding", "ServiceAccount"]
    kinds = ["ConfigMap", "Deployment", "Role", "RoleBinding", "ServiceAccount"]
    assert sorted(report.pruned) == [(k, "qwen3-8b-autoscaler") for k in kinds]
    deleted = await asyncio.to_thread(
        delete_release, cluster.client, release="qwen3-8b", namespace="inference"
    )
    assert deleted[0][0] in ("ServiceMonitor", "PodMonitor", "PrometheusRule")
    assert deleted[-1][0] in ("ServiceAccount", "Role", "RoleBinding", "ConfigMap")
    assert (
        await asyncio.to_thread(release_status, cluster.client, release="qwen3-8b", namespace="inference")
        == []
    )
