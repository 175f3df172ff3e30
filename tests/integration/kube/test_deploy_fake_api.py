"""``infctl deploy`` against a fake API server over HTTP: request contract, order, wait, prune, errors."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from kubefake import FakeCluster

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
    # The autoscaler's Service, ServiceMonitor (monitoring) and memory go with it.
    kinds = ["ConfigMap", "Deployment", "Role", "RoleBinding", "Service", "ServiceAccount", "ServiceMonitor"]
    pruned = [(k, "qwen3-8b-autoscaler") for k in kinds] + [("ConfigMap", "qwen3-8b-autoscaler-memory")]
    assert sorted(report.pruned) == sorted(pruned)
    later = list(cluster.api)[before:]
    lists = [r for r in later if r.method.value == "GET" and "labelSelector" in r.params]
    assert lists
    assert {r.params["labelSelector"] for r in lists} == {
        "infctl.io/release=qwen3-8b,app.kubernetes.io/managed-by=infctl"
    }
    deletes = [r.url.path for r in later if r.method.value == "DELETE"]
    assert "/apis/apps/v1/namespaces/inference/deployments/qwen3-8b-autoscaler" in deletes
    assert "/apis/apps/v1/namespaces/inference/deployments/qwen3-8b-engine" not in deletes
    assert {a.action for a in report.applied} <= {"unchanged", "configured"}


async def test_missing_crd_is_named_with_its_install_command(cluster: FakeCluster) -> None:
    cluster.api.without |= {
        "leaderworkerset.x-k8s.io/v1/leaderworkersets",
        "monitoring.coreos.com/v1/podmonitors",
    }
    cluster.api.resources.clear()
    cluster.api.serve()
    with pytest.raises(MissingCRDError) as err:
        await deploy(cluster, objects(KIMI))
    assert "LeaderWorkerSet (leaderworkersets.leaderworkerset.x-k8s.io)" in err.value.message
    assert "PodMonitor (podmonitors.monitoring.coreos.com)" in err.value.message
    assert err.value.hint and "lws" in err.value.hint and "prometheus-operator-crds" in err.value.hint
    assert err.value.exit_code == 3
    assert not applies(cluster)


async def test_conflict_surfaces_the_server_message_and_force_takes_over(cluster: FakeCluster) -> None:
    cluster.api.conflicts.add(("deployments", "qwen3-8b-engine"))
    with pytest.raises(ApplyConflictError) as err:
        await deploy(cluster, objects())
    assert err.value.status == 409 and err.value.exit_code == 4
    assert 'conflict with "kubectl-edit"' in err.value.message
    assert "Deployment/qwen3-8b-engine" in err.value.message
    report, _ = await deploy(cluster, objects(), force=True)
    assert all(r.params["force"] == "true" for r in applies(cluster)[-len(report.applied) :])


async def test_server_dry_run_stores_nothing(cluster: FakeCluster) -> None:
    report, _ = await deploy(cluster, objects(), dry_run="server")
    assert {a.action for a in report.applied} == {"would apply"}
    assert all(r.params.get("dryRun") == "All" for r in applies(cluster))
    assert cluster.api.namespace_calls == [("GET", ""), ("POST", "All")]
    assert await status(cluster) == []


async def test_client_dry_run_writes_nothing(cluster: FakeCluster) -> None:
    await deploy(cluster, objects(), dry_run="client")
    assert {r.method.value for r in cluster.api} == {"GET"}
    assert {m for m, _ in cluster.api.namespace_calls} == {"GET"}


async def test_autoscaled_replicas_left_to_the_autoscaler_on_reapply(cluster: FakeCluster) -> None:
    await deploy(cluster, objects())
    assert await asyncio.to_thread(scale, cluster.client, "Deployment", "qwen3-8b-engine", 6) == 6
    scales = [r for r in cluster.api if r.subresource == "scale"]
    assert scales[-1].url.path == "/apis/apps/v1/namespaces/inference/deployments/qwen3-8b-engine/scale"
    await deploy(cluster, objects())
    last = [r for r in applies(cluster) if r.url.path.endswith("/deployments/qwen3-8b-engine")][-1]
    assert "replicas" not in last.data["spec"]
    engine = next(s for s in await status(cluster) if (s.kind, s.name) == ("Deployment", "qwen3-8b-engine"))
    assert engine.detail == "6/6 available"


async def test_httproute_weights_with_optimistic_concurrency(cluster: FakeCluster) -> None:
    await deploy(cluster, objects())
    route = await asyncio.to_thread(
        patch_httproute_weights, cluster.client, "qwen3-8b", {"qwen3-8b-router": 40}, namespace="inference"
    )
    assert route["spec"]["rules"][0]["backendRefs"][0]["weight"] == 40
    patches = [
        r for r in cluster.api if r.method.value == "PATCH" and r.url.path.endswith("/httproutes/qwen3-8b")
    ]
    assert patches[-1].headers["Content-Type"] == "application/merge-patch+json"
    assert patches[-1].data["metadata"]["resourceVersion"]


async def test_diff_status_and_delete(cluster: FakeCluster) -> None:
    objs = objects()
    diffs = await asyncio.to_thread(
        diff_release, cluster.client, objs, release="qwen3-8b", namespace="inference"
    )
    assert {d.action for d in diffs} == {"create"}
    await deploy(cluster, objs)
    changed = objects(QWEN, "router.replicas=3")
    diffs = await asyncio.to_thread(
        diff_release, cluster.client, changed, release="qwen3-8b", namespace="inference"
    )
    assert ("Deployment", "qwen3-8b-router", "update") in {(d.kind, d.name, d.action) for d in diffs}
    router = next(d for d in diffs if (d.kind, d.name) == ("Deployment", "qwen3-8b-router"))
    assert "-  replicas: 2\n+  replicas: 3" in router.diff  # two by default (a restart loses no request)
    deleted = await asyncio.to_thread(
        delete_release, cluster.client, release="qwen3-8b", namespace="inference"
    )
    assert deleted[0][0] in ("ServiceMonitor", "PodMonitor", "PrometheusRule")
    assert deleted[-1][0] in ("ServiceAccount", "Role", "RoleBinding", "ConfigMap")
    assert await status(cluster) == []


async def status(cluster: FakeCluster) -> list[Any]:
    return await asyncio.to_thread(release_status, cluster.client, release="qwen3-8b", namespace="inference")
