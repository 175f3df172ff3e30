"""The deploy/status/diff/delete commands end to end: a kubeconfig file pointing at the fake API server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from kubefake import FakeCluster
from typer.testing import CliRunner, Result

from infctl.cli.main import _register, app

ROOT = Path(__file__).resolve().parents[3]
QWEN = str(ROOT / "profiles" / "qwen3-8b-aggregated.yaml")
KIMI = str(ROOT / "profiles" / "kimi-k2-pool.yaml")
runner = CliRunner()
_register()


def kubeconfig(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "clusters": [{"name": "fake", "cluster": {"server": url}}],
        "users": [{"name": "fake", "user": {"token": "t"}}],
        "contexts": [{"name": "fake",
                      "context": {"cluster": "fake", "user": "fake", "namespace": "inference"}}],
    }))  # fmt: skip
    return path


async def infctl(config: Path, *args: str) -> Result:
    return await asyncio.to_thread(runner.invoke, app, ["--kubeconfig", str(config), *args])


async def test_deploy_status_diff_delete(cluster: FakeCluster, tmp_path: Path) -> None:
    config = kubeconfig(tmp_path, cluster.url)
    deployed = await infctl(config, "-o", "json", "deploy", "-f", QWEN, "--timeout", "10")
    assert deployed.exit_code == 0, deployed.output
    summary = json.loads(deployed.stdout)
    assert summary["namespace"] == "inference" and all(r["ready"] for r in summary["ready"])
    token = summary["admin_token"]
    assert token["secret"] == "qwen3-8b-router-admin" and token["action"] == "created"
    assert token["read"].startswith("kubectl get secret qwen3-8b-router-admin -n inference -o jsonpath=")
    again = await infctl(config, "deploy", "-f", QWEN, "--timeout", "10")  # the text form
    assert again.exit_code == 0, again.output
    assert "Secret qwen3-8b-router-admin (kept)" in again.stdout
    assert "export INFCTL_ROUTER_ADMIN_TOKEN=$(kubectl get secret" in again.stdout
    status = await infctl(config, "-o", "json", "status", "-f", QWEN)
    assert status.exit_code == 0, status.output
    ready = {o["name"]: o["ready"] for o in json.loads(status.stdout)["objects"] if o["kind"] == "Deployment"}
    assert ready["qwen3-8b-engine"] and ready["qwen3-8b-router"]
    same = await infctl(config, "diff", "-f", QWEN, "--exit-code")
    assert same.exit_code == 0, same.output
    changed = await infctl(config, "diff", "-f", QWEN, "--set", "router.replicas=3", "--exit-code")
    assert changed.exit_code == 1 and "+  replicas: 3" in changed.stdout
    deleted = await infctl(config, "-o", "json", "delete", "-f", QWEN)
    assert deleted.exit_code == 0, deleted.output
    assert len(json.loads(deleted.stdout)["deleted"]) == summary["applied"].__len__()
    gone = await infctl(config, "status", "-f", QWEN)
    assert gone.exit_code == 1 and "no objects of release 'qwen3-8b'" in gone.output


async def test_missing_crd_exit_code_and_message(cluster: FakeCluster, tmp_path: Path) -> None:
    cluster.api.without.add("leaderworkerset.x-k8s.io/v1/leaderworkersets")
    cluster.api.resources.clear()
    cluster.api.serve()
    result = await infctl(kubeconfig(tmp_path, cluster.url), "deploy", "-f", KIMI)
    assert result.exit_code == 3
    assert "LeaderWorkerSet (leaderworkersets.leaderworkerset.x-k8s.io)" in result.output
    assert "kubectl apply --server-side -f" in result.output
