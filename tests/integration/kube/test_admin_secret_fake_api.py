"""The router's admin-token Secret on deploy, against the fake API server: created once, never overwritten."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

import pytest
from kubefake import FakeCluster

from infctl.config import load_deployment
from infctl.errors import KubeError
from infctl.kube import DeployOptions, KubeClient, deploy_release, ensure_admin_secret
from infctl.manifests import RenderOptions, render
from infctl.manifests.admin_secret import AdminSecretRef

ROOT = Path(__file__).resolve().parents[3]
QWEN = ROOT / "profiles" / "qwen3-8b-aggregated.yaml"
SECRET = "qwen3-8b-router-admin"


def objects(*overrides: str, options: RenderOptions | None = None) -> list[dict[str, Any]]:
    return render(load_deployment(QWEN, list(overrides)), options or RenderOptions())


async def deploy(cluster: FakeCluster, objs: list[dict[str, Any]], **options: Any) -> Any:
    opts = DeployOptions(**{"interval_s": 0.01, "timeout_s": 5, **options})
    events: list[tuple[str, Any]] = []
    report = await asyncio.to_thread(
        deploy_release, cluster.client, objs, release="qwen3-8b", namespace="inference", options=opts,
        on_event=lambda k, d: events.append((k, d)),
    )  # fmt: skip
    return report, events


async def call(cluster: FakeCluster, method: str, path: str, body: Any = None) -> dict[str, Any]:
    """One request to the fake API off the event loop (which serves it)."""
    return await asyncio.to_thread(cluster.client.request, method, path, body=body)


async def stored(cluster: FakeCluster, name: str = SECRET) -> dict[str, Any]:
    return await call(cluster, "GET", f"/api/v1/namespaces/inference/secrets/{name}")


async def stored_token(cluster: FakeCluster, name: str = SECRET) -> str:
    return base64.b64decode((await stored(cluster, name))["data"]["token"]).decode()


async def create(cluster: FakeCluster, name: str, data: dict[str, str], field: str = "stringData") -> None:
    body = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, field: data}
    await call(cluster, "POST", "/api/v1/namespaces/inference/secrets", body)


def secret_posts(cluster: FakeCluster) -> list[Any]:
    return [
        r for r in cluster.api if r.method.value == "POST" and r.resource and r.resource.plural == "secrets"
    ]


async def test_deploy_creates_the_secret_before_the_router_and_keeps_it(cluster: FakeCluster) -> None:
    report, events = await deploy(cluster, objects())
    assert report.admin_secret.action == "created"
    assert [k for k, _ in events][:2] == ["secret", "phase"]  # before any object is applied
    first = await stored_token(cluster)
    assert len(first) >= 40 and first.strip() == first
    secret = await stored(cluster)
    assert secret["metadata"]["labels"]["infctl.io/release"] == "qwen3-8b"
    # A second deploy (and a prune pass) leaves the Secret and its token alone.
    again, _ = await deploy(cluster, objects())
    assert again.admin_secret.action == "kept"
    assert await stored_token(cluster) == first
    assert len(secret_posts(cluster)) == 1
    assert ("Secret", SECRET) not in again.pruned


async def test_an_operator_made_secret_is_never_overwritten(cluster: FakeCluster) -> None:
    await create(cluster, SECRET, {"token": "mine"})
    report, _ = await deploy(cluster, objects())
    assert report.admin_secret.action == "kept"
    assert await stored_token(cluster) == "mine"


async def test_dry_runs_create_nothing(cluster: FakeCluster) -> None:
    for mode in ("client", "server"):
        report, _ = await deploy(cluster, objects(), dry_run=mode)
        assert report.admin_secret.action == "would create"
    assert all(r.params.get("dryRun") == "All" for r in secret_posts(cluster))
    with pytest.raises(KubeError) as err:
        await stored(cluster)
    assert err.value.status == 404


async def test_a_named_secret_must_exist_and_hold_a_token(cluster: FakeCluster) -> None:
    objs = objects(options=RenderOptions(admin_token_secret="shared-admin"))
    with pytest.raises(KubeError, match=r"shared-admin.*does not exist") as err:
        await deploy(cluster, objs)
    assert err.value.hint is not None and "kubectl create secret generic shared-admin" in err.value.hint
    assert secret_posts(cluster) == []
    await create(cluster, "shared-admin", {"other": "eA=="}, field="data")
    with pytest.raises(KubeError, match="no 'token' key"):
        await deploy(cluster, objs)


async def test_no_router_no_secret(cluster: FakeCluster) -> None:
    objs = objects("router.enabled=false", "autoscaler.enabled=false", options=RenderOptions(traffic=False))
    report, events = await deploy(cluster, objs, wait=False)
    assert report.admin_secret is None and "secret" not in [k for k, _ in events]
    assert secret_posts(cluster) == []


class _ReadBeforeTheirCreate(KubeClient):
    """Reads of the Secret answer 404, as when another deploy creates it between our read and our create."""

    def request(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        if method == "GET" and path.endswith(f"/secrets/{SECRET}"):
            raise KubeError("not found", status=404)
        return super().request(method, path, **kw)


async def test_a_create_race_keeps_the_winner(cluster: FakeCluster) -> None:
    await create(cluster, SECRET, {"token": "theirs"})
    racing = _ReadBeforeTheirCreate(cluster.client.api, "inference")
    got = await asyncio.to_thread(ensure_admin_secret, racing, AdminSecretRef(SECRET, "inference"),
                                  release="qwen3-8b", new_token=lambda: "ours")  # fmt: skip
    assert got.action == "kept"
    assert await stored_token(cluster) == "theirs"
