"""The profile models: defaults, derived values, cross-field rules and the replica list."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from infctl.config import DeploymentProfile, ModelProfile, ReplicaSpec

MODEL: dict[str, Any] = {"engine": "vllm", "model": "Qwen/Qwen3-8B"}
CLUSTER: dict[str, Any] = {"name": "c", "switch_label": "topology.kubernetes.io/zone", "gpus_per_node": 8}


def deployment(**fields: Any) -> DeploymentProfile:
    data: dict[str, Any] = {"name": "d", "mode": "aggregated", "model": MODEL, "cluster": CLUSTER, **fields}
    return DeploymentProfile.model_validate(data)


def errors_of(call: Any) -> list[str]:
    with pytest.raises(ValidationError) as info:
        call()
    return [str(e) for e in info.value.errors()]


def test_served_model_name_defaults_to_model() -> None:
    assert ModelProfile.model_validate(MODEL).served_model_name == "Qwen/Qwen3-8B"
    assert ModelProfile.model_validate({**MODEL, "served_model_name": "q"}).served_model_name == "q"


def test_models_are_frozen_and_reject_unknown_keys() -> None:
    model = ModelProfile.model_validate(MODEL)
    with pytest.raises(ValidationError):
        model.engine = "sglang"  # type: ignore[misc]
    assert "extra_forbidden" in errors_of(lambda: ModelProfile.model_validate({**MODEL, "tp": 2}))[0]


def test_gpus_per_replica_is_tp_times_dp() -> None:
    model = ModelProfile.model_validate({**MODEL, "tensor_parallel_size": 4, "data_parallel_size": 2})
    assert model.gpus_per_replica == 8


@pytest.mark.parametrize(
    ("engine", "section", "bad_key"),
    [
        ("sglang", {"kv_offload": {"backend": "lmcache", "size_gib": 1}}, "backend"),
        ("vllm", {"kv_offload": {"backend": "hicache", "size_gib": 1}}, "backend"),
        ("vllm", {"pd": {"transfer_backend": "nixl"}}, "transfer_backend"),
        ("sglang", {"pd": {"kv_connector": "nixl"}}, "kv_connector"),
        ("vllm", {"dp_attention": True}, "dp_attention"),
        ("vllm", {"enable_eplb": True}, "enable_eplb"),
        ("vllm", {"speculative": {"method": "eagle"}}, "draft_model"),
    ],
)
def test_engine_specific_settings_are_checked(engine: str, section: dict[str, Any], bad_key: str) -> None:
    errors = errors_of(lambda: ModelProfile.model_validate({**MODEL, "engine": engine, **section}))
    assert any(bad_key in e for e in errors), errors


def test_engine_specific_settings_pass_with_their_engine() -> None:
    sglang = {
        "engine": "sglang",
        "model": "m",
        "dp_attention": True,
        "pd": {"transfer_backend": "nixl"},
        "kv_offload": {
            "backend": "hicache",
            "size_gib": 8,
            "storage_backend": "mooncake",
            "pool": {"address": "mooncake-master:50051"},
        },
    }
    assert ModelProfile.model_validate(sglang).pd is not None
    vllm = {**MODEL, "pd": {"kv_connector": "nixl"}, "kv_offload": {"backend": "native", "size_gib": 8}}
    assert ModelProfile.model_validate(vllm).kv_offload is not None


def test_engine_replicas_in_group_mode() -> None:
    p = deployment(mode="group", groups=2, group={"prefill": 1, "decode": 2}, model={**MODEL, "pd": {}})
    replicas = p.engine_replicas()
    assert [r.name for r in replicas] == [
        "g0-prefill-0",
        "g0-decode-0",
        "g0-decode-1",
        "g1-prefill-0",
        "g1-decode-0",
        "g1-decode-1",
    ]
    assert replicas[4] == ReplicaSpec(role="decode", index=0, group=1)
    assert p.replicas_by_role() == {"prefill": 2, "decode": 4}


def test_engine_replicas_in_pool_mode() -> None:
    p = deployment(mode="pool", pools={"prefill": 2, "decode": 3}, model={**MODEL, "pd": {}})
    replicas = p.engine_replicas()
    assert [(r.role, r.pool, r.group) for r in replicas].count(("decode", "decode", None)) == 3
    assert [r.name for r in replicas][:3] == ["prefill-0", "prefill-1", "decode-0"]


def test_engine_replicas_in_aggregated_mode() -> None:
    replicas = deployment(replicas=3).engine_replicas()
    assert [(r.role, r.workload, r.index) for r in replicas] == [("both", "engine", i) for i in range(3)]


@pytest.mark.parametrize(
    ("fields", "where"),
    [
        ({"mode": "group"}, "group"),  # layout missing
        ({"mode": "pool", "pools": {"prefill": 1, "decode": 1}, "replicas": 2}, "replicas"),  # foreign layout
        ({"mode": "group", "group": {"prefill": 1, "decode": 1}}, "pd"),  # PD without transfer settings
        ({"cluster": None}, "cluster"),  # kubernetes needs a cluster
        ({"target": "local", "cluster": None}, "sim"),  # simulating needs sim settings
        ({"name": "Bad_Name"}, "DNS-1123"),
        ({"model": {**MODEL, "tensor_parallel_size": 12}}, "whole number"),  # 12 GPUs on 8-GPU nodes
        ({"autoscaler": {"enabled": True}}, "no bounds"),
        ({"autoscaler": {"decode": {"min": 1, "max": 2}}}, "no decode replicas"),
        ({"autoscaler": {"both": {"min": 3, "max": 2}}}, "min"),
    ],
)
def test_deployment_rules(fields: dict[str, Any], where: str) -> None:
    errors = errors_of(lambda: deployment(**fields))
    assert any(where in e for e in errors), errors


def test_multi_node_replicas_take_whole_nodes() -> None:
    p = deployment(model={**MODEL, "tensor_parallel_size": 8, "data_parallel_size": 2})
    assert p.nodes_per_replica == 2
    assert deployment().nodes_per_replica == 1


def test_local_target_needs_no_cluster() -> None:
    p = deployment(target="local", cluster=None, model={**MODEL, "sim": {"profile": "llama3-8b-h100"}})
    assert p.cluster is None and p.local.base_port == 8100 and p.local.simulate
    real = deployment(target="local", cluster=None, local={"simulate": False})
    assert real.model.sim is None
