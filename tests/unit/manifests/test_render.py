"""Rendered objects: group pinning, pool scaling, engine pods, traffic weights, the render command."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from infctl.cli.main import _register, app
from infctl.config import load_deployment
from infctl.errors import ConfigError
from infctl.manifests import RenderOptions, render
from infctl.manifests import labels as L

ROOT = Path(__file__).resolve().parents[3]
DEEPSEEK = ROOT / "profiles" / "deepseek-v3-group.yaml"
KIMI = ROOT / "profiles" / "kimi-k2-pool.yaml"
QWEN = ROOT / "profiles" / "qwen3-8b-aggregated.yaml"
SWITCH = "network.topology.nvidia.com/block"


def objects(path: Path, *overrides: str, **options: Any) -> list[dict[str, Any]]:
    return render(load_deployment(path, list(overrides)), RenderOptions(**options))


def engines(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        o
        for o in objs
        if o["kind"] in ("Deployment", "LeaderWorkerSet") and o["metadata"]["labels"][L.COMPONENT] == "engine"
    ]


def pod_templates(obj: dict[str, Any]) -> list[dict[str, Any]]:
    if obj["kind"] == "Deployment":
        return [obj["spec"]["template"]]
    lwt = obj["spec"]["leaderWorkerTemplate"]
    return [lwt["leaderTemplate"], lwt["workerTemplate"]]


def test_group_mode_pins_every_pod_of_a_group_to_one_switch() -> None:
    objs = objects(DEEPSEEK, "groups=3")
    seen: dict[str, int] = {}
    for obj in engines(objs):
        for tpl in pod_templates(obj):
            group = tpl["metadata"]["labels"][L.GROUP]
            term = tpl["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            assert term == [
                {
                    "labelSelector": {"matchLabels": {L.RELEASE: "deepseek-v3", L.GROUP: group}},
                    "topologyKey": SWITCH,
                }
            ]
            seen[group] = seen.get(group, 0) + 1
    assert sorted(seen) == ["g0", "g1", "g2"]


def test_oversize_group_is_refused_before_rendering() -> None:
    with pytest.raises(ConfigError, match="under one switch"):
        objects(DEEPSEEK, "group.decode=8")


def test_pool_mode_scales_per_role() -> None:
    objs = objects(KIMI, "pools.prefill=3", "pools.decode=5")
    replicas = {o["metadata"]["labels"][L.ROLE]: o["spec"]["replicas"] for o in engines(objs)}
    assert replicas == {"prefill": 3, "decode": 5}
    for obj in engines(objs):
        assert "affinity" not in pod_templates(obj)[0]["spec"]
    scaler = next(
        o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "kimi-k2-autoscaler"
    )
    targets = yaml.safe_load(scaler["data"]["autoscaler.yaml"])["targets"]
    assert [(t["name"], t["role"], t["min"], t["max"]) for t in targets] == [
        ("kimi-k2-prefill", "prefill", 1, 4),
        ("kimi-k2-decode", "decode", 2, 8),
    ]
    role = next(o for o in objs if o["kind"] == "Role" and o["metadata"]["name"] == "kimi-k2-autoscaler")
    assert role["rules"] == [
        {
            "apiGroups": ["leaderworkerset.x-k8s.io"],
            "resources": ["leaderworkersets/scale"],
            "resourceNames": ["kimi-k2-prefill", "kimi-k2-decode"],
            "verbs": ["get", "update", "patch"],
        },
        {
            "apiGroups": ["leaderworkerset.x-k8s.io"],
            "resources": ["leaderworkersets"],
            "resourceNames": ["kimi-k2-prefill", "kimi-k2-decode"],
            "verbs": ["get"],
        },
        # A scale-in marks the pods it removes draining first (infctl.autoscaler.kube_drain).
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "patch"]},
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "resourceNames": ["kimi-k2-autoscaler-memory"],
            "verbs": ["get", "patch"],
        },
    ]


def test_multi_node_replica_is_a_leader_worker_set_with_probes_on_the_leader_only() -> None:
    lws = engines(objects(KIMI))[0]
    assert lws["kind"] == "LeaderWorkerSet" and lws["spec"]["leaderWorkerTemplate"]["size"] == 2
    leader, worker = (t["spec"]["containers"][0] for t in pod_templates(lws))
    assert leader["readinessProbe"]["httpGet"] == {"path": "/health", "port": "http"}
    assert "readinessProbe" not in worker
    leader_labels, worker_labels = (t["metadata"]["labels"] for t in pod_templates(lws))
    assert leader_labels[L.SERVES] == "http" and L.SERVES not in worker_labels
    assert "--headless" in worker["command"][-1] and "$((LWS_WORKER_INDEX * 8))" in worker["command"][-1]
    # `vllm serve`: the program that honours --headless (the deprecated api_server module ignores it).
    assert worker["command"][-1].startswith("exec vllm serve ")
    assert leader["resources"]["limits"] == {"nvidia.com/gpu": 8, "rdma/ib": 1}
    assert {"name": "dshm", "mountPath": "/dev/shm"} in leader["volumeMounts"]
    svc = next(
        o for o in objects(KIMI) if o["kind"] == "Service" and o["metadata"]["name"] == "kimi-k2-prefill"
    )
    assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["publishNotReadyAddresses"] is True


def test_single_node_engine_is_a_deployment_with_adapter_args() -> None:
    (dep,) = engines(objects(QWEN))
    container = dep["spec"]["template"]["spec"]["containers"][0]
    assert container["command"][:3] == ["vllm", "serve", "Qwen/Qwen3-8B"]
    assert dep["spec"]["replicas"] == 4
    assert dep["spec"]["selector"]["matchLabels"] == {L.RELEASE: "qwen3-8b", L.WORKLOAD: "engine"}
    claim = dep["spec"]["template"]["spec"]["volumes"][1]["persistentVolumeClaim"]
    assert claim == {"claimName": "model-cache", "readOnly": True}


def test_weighted_route_to_old_system_and_inference_pool() -> None:
    route = next(o for o in objects(QWEN, old_backend="legacy/gw:80", weight=10) if o["kind"] == "HTTPRoute")
    assert route["spec"]["rules"][0]["backendRefs"] == [
        {"name": "qwen3-8b-router", "port": 8000, "weight": 10},
        {"name": "gw", "port": 80, "namespace": "legacy", "weight": 90},
    ]
    objs = objects(QWEN, inference_pool_epp="qwen-epp")
    pool = next(o for o in objs if o["kind"] == "InferencePool")
    assert pool["spec"]["selector"]["matchLabels"] == {L.RELEASE: "qwen3-8b", L.ROLE: "both"}
    ref = next(o for o in objs if o["kind"] == "HTTPRoute")["spec"]["rules"][0]["backendRefs"][0]
    assert ref["kind"] == "InferencePool" and ref["name"] == "qwen3-8b-pool"


def test_every_object_carries_the_release_labels() -> None:
    for obj in objects(DEEPSEEK):
        labels = obj["metadata"]["labels"]
        assert labels[L.RELEASE] == "deepseek-v3" and labels[L.MANAGED_BY] == "infctl"
        assert obj["metadata"]["namespace"] == "inference"


def test_local_profile_is_not_rendered() -> None:
    with pytest.raises(ConfigError, match="only kubernetes profiles"):
        objects(ROOT / "profiles" / "local-demo.yaml")


runner = CliRunner()
_register()


def test_render_command_stdout_and_files(tmp_path: Path) -> None:
    result = runner.invoke(app, ["render", "-f", str(QWEN), "--no-monitoring", "--no-traffic"])
    assert result.exit_code == 0, result.output
    kinds = [d["kind"] for d in yaml.safe_load_all(result.stdout)]
    assert "PrometheusRule" not in kinds and "HTTPRoute" not in kinds and "Deployment" in kinds
    result = runner.invoke(app, ["render", "-f", str(QWEN), "-d", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out" / "12-deployment-qwen3-8b-engine.yaml").is_file()


def test_render_says_where_the_admin_token_comes_from_without_rendering_one() -> None:
    result = runner.invoke(app, ["render", "-f", str(QWEN)])
    assert result.exit_code == 0, result.output
    head = result.stdout.split("apiVersion:", 1)[0]
    assert "Secret inference/qwen3-8b-router-admin" in head and "kubectl create secret generic" in head
    assert "Secret" not in [d["kind"] for d in yaml.safe_load_all(result.stdout)]


def test_render_command_refuses_oversize_group_with_exit_2() -> None:
    result = runner.invoke(app, ["render", "-f", str(DEEPSEEK), "--set", "group.decode=8"])
    assert result.exit_code == 2
    assert "under one switch" in result.output


def test_render_command_validate_reports_bad_version() -> None:
    result = runner.invoke(app, ["render", "-f", str(QWEN), "--validate", "--k8s-version", "0.1"])
    assert result.exit_code == 2
    assert "--k8s-version 0.1" in result.output


def test_the_router_file_trusts_request_templates_when_the_engines_do() -> None:
    """vLLM's --trust-request-chat-template in the model's extra_args reaches the engines' args and the
    router's file (``trust_request_chat_template``); without it the key is left to its default (false)."""

    def router_yaml(*overrides: str) -> dict[str, Any]:
        objs = objects(QWEN, *overrides)
        cm = next(o for o in objs if o["kind"] == "ConfigMap" and "router.yaml" in o.get("data", {}))
        return dict(yaml.safe_load(cm["data"]["router.yaml"]))

    assert "trust_request_chat_template" not in router_yaml()
    assert router_yaml("model.extra_args=[--trust-request-chat-template]")["trust_request_chat_template"]
