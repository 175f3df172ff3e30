"""Rendered vLLM NIXL PD pods advertise their own IP as the KV side channel (not vLLM's default localhost)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from infctl.config import load_deployment
from infctl.manifests import labels as L
from infctl.manifests import render

ROOT = Path(__file__).resolve().parents[3]
KIMI = ROOT / "profiles" / "kimi-k2-pool.yaml"
QWEN = ROOT / "profiles" / "qwen3-8b-aggregated.yaml"
DEEPSEEK = ROOT / "profiles" / "deepseek-v3-group.yaml"
HOST = "VLLM_NIXL_SIDE_CHANNEL_HOST"
POD_IP = {"fieldRef": {"fieldPath": "status.podIP"}}
GROUP = (
    "mode=group",
    "pools=null",
    "autoscaler.enabled=false",
    "groups=2",
    "group.prefill=1",
    "group.decode=1",
)
"""Kimi K2's model in Group mode."""
ONE_NODE = ("model.data_parallel_size=8",)
"""A replica on one node (a Deployment) instead of two (a LeaderWorkerSet)."""


def engine_pods(*overrides: str, path: Path = KIMI) -> list[tuple[str, str, dict[str, Any]]]:
    """(role, kind/template, engine container) of every rendered engine pod template."""
    found = []
    for obj in render(load_deployment(path, list(overrides))):
        labels = obj["metadata"]["labels"]
        if obj["kind"] not in ("Deployment", "LeaderWorkerSet") or labels[L.COMPONENT] != "engine":
            continue
        if obj["kind"] == "Deployment":
            templates = {"pod": obj["spec"]["template"]}
        else:
            lwt = obj["spec"]["leaderWorkerTemplate"]
            templates = {"leader": lwt["leaderTemplate"], "worker": lwt["workerTemplate"]}
        for which, tpl in templates.items():
            found.append((labels[L.ROLE], which, tpl["spec"]["containers"][0]))
    return found


def env_of(container: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return [e for e in container["env"] if e["name"] == name]


@pytest.mark.parametrize(
    ("overrides", "templates"),
    [
        ((), {"leader", "worker"}),  # pool mode, a replica over two nodes
        (ONE_NODE, {"pod"}),  # pool mode, one node
        (GROUP, {"leader", "worker"}),
        ((*GROUP, *ONE_NODE), {"pod"}),
    ],
    ids=["pool-lws", "pool-deployment", "group-lws", "group-deployment"],
)
def test_every_nixl_engine_pod_names_its_own_ip_as_side_channel_host(
    overrides: tuple[str, ...], templates: set[str]
) -> None:
    pods = engine_pods(*overrides)
    assert {role for role, _, _ in pods} == {"prefill", "decode"}
    assert {which for _, which, _ in pods} == templates
    for role, which, container in pods:
        assert env_of(container, HOST) == [{"name": HOST, "valueFrom": POD_IP}], (role, which)


def test_the_profiles_own_side_channel_host_is_kept_alone() -> None:
    for _, _, container in engine_pods(f"model.env.{HOST}=10.1.2.3"):
        assert env_of(container, HOST) == [{"name": HOST, "value": "10.1.2.3"}]


def test_engines_without_nixl_pd_do_not_get_it() -> None:
    # SGLang PD, even on its own NIXL transfer, is not vLLM's NIXL connector.
    sglang = engine_pods("model.pd.transfer_backend=nixl", path=DEEPSEEK)
    aggregated = engine_pods(path=QWEN)
    assert {role for role, _, _ in sglang} == {"prefill", "decode"} and aggregated
    for _, _, container in [*sglang, *aggregated]:
        assert env_of(container, HOST) == []
