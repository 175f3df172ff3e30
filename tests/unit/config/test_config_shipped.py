"""Every profile shipped in profiles/ loads and describes what its comments say."""

from __future__ import annotations

from pathlib import Path

import pytest

from infctl.config import ClusterProfile, DeploymentProfile, ModelProfile, load_deployment
from infctl.config.loader import load_profile

PROFILES = Path(__file__).resolve().parents[3] / "profiles"
SHIPPED = sorted(PROFILES.rglob("*.yaml"))


def test_the_expected_profiles_are_shipped() -> None:
    names = {p.relative_to(PROFILES).as_posix() for p in SHIPPED}
    assert {
        "models/deepseek-v3-sglang.yaml",
        "models/kimi-k2-vllm.yaml",
        "models/qwen3-8b-vllm.yaml",
        "clusters/h200-ib.yaml",
        "clusters/h100-eks.yaml",
        "deepseek-v3-group.yaml",
        "kimi-k2-pool.yaml",
        "qwen3-8b-aggregated.yaml",
        "local-demo.yaml",
        "local-pd.yaml",
    } <= names


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.relative_to(PROFILES).as_posix())
def test_shipped_profile_loads(path: Path) -> None:
    profile = load_profile(path)
    expected = {"models": ModelProfile, "clusters": ClusterProfile}.get(path.parent.name, DeploymentProfile)
    assert isinstance(profile, expected)


def test_deepseek_group_is_two_groups_of_one_prefill_two_decode_on_two_node_replicas() -> None:
    p = load_deployment(PROFILES / "deepseek-v3-group.yaml")
    assert (p.mode, p.model.engine, p.groups) == ("group", "sglang", 2)
    assert p.replicas_by_role() == {"prefill": 2, "decode": 4}
    assert p.nodes_per_replica == 2
    assert p.model.pd is not None and p.model.pd.transfer_backend == "mooncake"
    assert p.model.kv_offload is not None and p.model.kv_offload.backend == "hicache"
    assert p.model.speculative is not None and p.model.speculative.method == "mtp"


def test_kimi_pool_uses_nixl_with_wide_ep() -> None:
    p = load_deployment(PROFILES / "kimi-k2-pool.yaml")
    assert p.mode == "pool" and p.model.engine == "vllm"
    assert p.model.pd is not None and p.model.pd.kv_connector == "nixl"
    assert p.model.expert_parallel and p.model.enable_eplb and p.model.data_parallel_size > 1


def test_local_profiles_simulate_without_a_cluster() -> None:
    demo = load_deployment(PROFILES / "local-demo.yaml")
    assert (demo.target, demo.mode, demo.replicas, demo.router.policy) == (
        "local",
        "aggregated",
        4,
        "cache_aware",
    )
    assert demo.model.sim is not None and demo.model.sim.profile == "llama3-8b-h100"
    assert demo.local.simulate and not demo.autoscaler.enabled
    pd = load_deployment(PROFILES / "local-pd.yaml")
    assert pd.replicas_by_role() == {"prefill": 1, "decode": 1}


@pytest.mark.parametrize("path", sorted((PROFILES / "clusters").glob("*.yaml")), ids=lambda p: p.name)
def test_cluster_profiles_offer_the_gateway_key(path: Path, tmp_path: Path) -> None:
    """``cluster.gateway`` changes what render writes for GKE: each shipped cluster profile shows it, as a
    commented line that loads as it reads once uncommented."""
    lines = path.read_text().splitlines(keepends=True)
    offered = [i for i, line in enumerate(lines) if line.startswith("# gateway: ")]
    assert len(offered) == 1, "a commented `# gateway: ...` line"
    lines[offered[0]] = lines[offered[0]].removeprefix("# ")
    uncommented = tmp_path / path.name
    uncommented.write_text("".join(lines))
    shipped, chosen = load_profile(path), load_profile(uncommented)
    assert isinstance(shipped, ClusterProfile) and isinstance(chosen, ClusterProfile)
    assert (shipped.gateway, chosen.gateway) == ("standard", "gke")
