"""Cutover on a Gateway API HTTPRoute against the fake Kubernetes API (kmock over real HTTP on 127.0.0.1):
weights on the backendRefs for every percent, a stale resourceVersion refused, the history on the route."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from cutoverstack import cli_app
from kubefake import FakeCluster
from typer.testing import CliRunner

from infctl.config import load_deployment
from infctl.cutover import (
    HTTPRouteBackend,
    Plan,
    PrometheusGateSource,
    StaleStateError,
    WalkOptions,
    WalkSettings,
    decide,
    from_annotations,
    load,
    set_percent,
    walk,
)
from infctl.cutover.ops import commit
from infctl.manifests import RenderOptions, render
from infctl.telemetry.scrape import make_client

PROFILE = Path(__file__).resolve().parents[3] / "profiles" / "qwen3-8b-aggregated.yaml"
PATH = "/apis/gateway.networking.k8s.io/v1/namespaces/inference/httproutes"
T0 = 1_700_000_000.0


async def create_route(cluster: FakeCluster, **options: Any) -> dict[str, Any]:
    """The HTTPRoute `infctl render` makes for qwen3-8b with an old system beside it, created in the API."""
    opts = RenderOptions(namespace="inference", old_backend="legacy/llm-gateway:80", **options)
    objs = render(load_deployment(PROFILE, []), opts)
    route = next(o for o in objs if o["kind"] == "HTTPRoute")
    return await asyncio.to_thread(cluster.client.request, "POST", PATH, body=route)


async def get_route(cluster: FakeCluster) -> dict[str, Any]:
    return await asyncio.to_thread(cluster.client.request, "GET", f"{PATH}/qwen3-8b")


def refs(route: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in route["spec"]["rules"][0]["backendRefs"]}


async def test_weights_written_for_every_percent(cluster: FakeCluster) -> None:
    await create_route(cluster)
    backend = HTTPRouteBackend(cluster.client, "qwen3-8b", "inference")
    for percent in [*range(101), 0]:
        done = await set_percent(backend, percent, old=None, new=None, now=T0 + percent, actor="ci")
        # the server's answer to the PATCH (what it stored), or the object as read when nothing was written
        assert done.view.observed.weights == {"qwen3-8b-router": percent, "llm-gateway": 100 - percent}
        assert done.changed is (percent != 0 or done.state.history != ())
    route = await get_route(cluster)
    r = refs(route)
    assert (r["qwen3-8b-router"]["weight"], r["llm-gateway"]["weight"]) == (0, 100)
    assert r["llm-gateway"]["namespace"] == "legacy" and r["llm-gateway"]["port"] == 80  # untouched
    state = from_annotations(route["metadata"]["annotations"])
    assert (state.old, state.new, state.percent) == ("llm-gateway", "qwen3-8b-router", 0)
    # 0% was already so at first (nothing written); then 1..100 and back to 0: 101 entries, the last 100 kept
    assert [e.percent for e in state.history] == [*range(2, 101), 0]


async def test_an_inference_pool_backend_ref_gets_the_weight(cluster: FakeCluster) -> None:
    await create_route(cluster, inference_pool_epp="qwen3-8b-epp")
    backend = HTTPRouteBackend(cluster.client, "qwen3-8b", "inference")
    await set_percent(backend, 40, old=None, new=None, now=T0, actor="ci")
    r = refs(await get_route(cluster))
    assert r["qwen3-8b-pool"]["kind"] == "InferencePool" and r["qwen3-8b-pool"]["weight"] == 40
    assert r["llm-gateway"]["weight"] == 60


async def test_a_stale_resource_version_is_refused_naming_the_other_writer(cluster: FakeCluster) -> None:
    await create_route(cluster)
    alice = HTTPRouteBackend(cluster.client, "qwen3-8b", "inference")
    bob = HTTPRouteBackend(cluster.client, "qwen3-8b", "inference")
    await set_percent(alice, 5, old=None, new=None, now=T0, actor="alice@ops")
    seen = await load(alice)
    await set_percent(bob, 30, old=None, new=None, now=T0 + 60, actor="bob@laptop")
    wanted = decide.set_percent(seen.state, 50, now=T0 + 61, actor="alice@ops")
    with pytest.raises(StaleStateError) as err:
        await commit(alice, seen, wanted, dry_run=False)
    assert "HTTPRoute inference/qwen3-8b changed since it was read" in err.value.message
    assert "the last cutover write was 30% by bob@laptop at 2023-11-14T22:14:20.000Z" in err.value.message
    assert err.value.exit_code == 4
    route = await get_route(cluster)
    assert refs(route)["qwen3-8b-router"]["weight"] == 30  # bob's write stands
    patches = [r for r in cluster.api if r.method.value == "PATCH" and r.url.path == f"{PATH}/qwen3-8b"]
    assert patches[-1].data["metadata"]["resourceVersion"] == seen.observed.version
    assert patches[-1].headers["Content-Type"] == "application/merge-patch+json"


def kubeconfig(path: Path, server: str) -> Path:
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "clusters": [{"name": "fake", "cluster": {"server": server}}],
        "users": [{"name": "me", "user": {"token": "t"}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "me", "namespace": "ns"}}],
    }))  # fmt: skip
    return path


async def test_cli_records_history_on_the_route_and_dry_run_writes_nothing(
    cluster: FakeCluster, tmp_path: Path
) -> None:
    await create_route(cluster)
    config = kubeconfig(tmp_path / "kubeconfig", cluster.url)

    async def cli(*args: str) -> tuple[int, Any]:
        argv = ["--kubeconfig", str(config), "-o", "json", "cutover", *args, "--httproute", "qwen3-8b",
                "-n", "inference"]  # fmt: skip
        result = await asyncio.to_thread(CliRunner().invoke, cli_app(), argv, env={"INFCTL_ACTOR": "ci"})
        return result.exit_code, json.loads(result.stdout) if result.exit_code == 0 else result.output

    for args in (["--percent", "10"], ["--pause"], ["--pause"], ["--percent", "20"], ["--rollback"]):
        code, _ = await cli(*args)
        assert code == 0
    writes = len([r for r in cluster.api if r.method.value == "PATCH"])
    code, dry = await cli("--percent", "50", "--dry-run")
    assert code == 0 and dry["dry_run"] and dry["weights"] == {"llm-gateway": 50, "qwen3-8b-router": 50}
    assert len([r for r in cluster.api if r.method.value == "PATCH"]) == writes
    code, status = await cli("status")
    assert (
        code == 0 and status["where"] == "HTTPRoute inference/qwen3-8b" and status["phase"] == "rolled-back"
    )
    assert [(e["action"], e["percent"], e["actor"]) for e in status["history"]] == [
        ("set", 10, "ci"), ("pause", 10, "ci"), ("set", 20, "ci"), ("rollback", 0, "ci"),
    ]  # fmt: skip
    code, missing = await cli("status", "--new", "nope")
    assert code == 1 and "has no 'nope'" in missing


async def test_walk_on_the_route_with_prometheus_gates_rolls_back(cluster: FakeCluster) -> None:
    """Gates from Prometheus (PromQL over the HTTP API, answered by a MockTransport), split on the route."""
    await create_route(cluster)
    windows = iter([0.001, 0.2])  # error rate of the new system in each window

    def prometheus(request: httpx.Request) -> httpx.Response:
        q = request.url.params["query"]
        result: list[dict[str, Any]] = []
        if q.startswith("sum by (upstream, status)"):
            bad = next(windows)
            result = [
                {"metric": {"upstream": "default", "status": "2xx"}, "value": [0, str(1000 * (1 - bad))]},
                {"metric": {"upstream": "default", "status": "5xx"}, "value": [0, str(1000 * bad)]},
            ]
        body = {"status": "success", "data": {"resultType": "vector", "result": result}}
        return httpx.Response(200, json=body)

    class Clock:
        t = T0

        def now(self) -> float:
            return self.t

        async def sleep(self, seconds: float) -> None:
            self.t += seconds

    backend = HTTPRouteBackend(cluster.client, "qwen3-8b", "inference")
    settings = WalkSettings(Plan((10, 50), 600), "error_rate<1%", WalkOptions(gate_new="default"))
    async with make_client(httpx.MockTransport(prometheus)) as client:
        report = await walk(backend, lambda groups: PrometheusGateSource(client, "http://prom:9090", groups),
                            settings, old=None, new=None, actor="ci", clock=Clock())  # fmt: skip
    assert report.outcome == "rolled-back" and report.reason.endswith("back to 10%")
    assert refs(await get_route(cluster))["qwen3-8b-router"]["weight"] == 10
    state = from_annotations((await get_route(cluster))["metadata"]["annotations"])
    assert [(e.action, e.percent) for e in state.history] == [
        ("start", 10),
        ("advance", 50),
        ("rollback", 10),
    ]
