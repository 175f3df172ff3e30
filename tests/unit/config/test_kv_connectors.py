"""vLLM KV connectors: the profile refuses those vLLM no longer registers or the router cannot drive, with
the reason and the fix."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from infctl.config import load_model
from infctl.engines.vllm_launch import KV_CONNECTORS, REFUSED_KV_CONNECTORS
from infctl.errors import ConfigError

VLLM_FACTORY = sorted(
    Path.home().glob(
        ".cache/infctl/vllm-venv/lib/python3*/site-packages/vllm/distributed/kv_transfer/kv_connector/factory.py"
    )
)
"""The installed vLLM's connector factory (the CI's slow stage and dev machines have it)."""


def write_model(tmp_path: Path, connector: str) -> Path:
    path = tmp_path / "model.yaml"
    path.write_text(f"engine: vllm\nmodel: m\npd:\n  ib_device: mlx5_0\n  kv_connector: {connector}\n")
    return path


@pytest.mark.parametrize(
    ("connector", "why"),
    [
        ("p2pnccl", "no longer registers P2pNcclConnector"),
        ("mooncake", "does not speak vLLM's MooncakeConnector"),
        ("lmcache", "does not drive LMCacheConnectorV1's PD mode"),
    ],
)
def test_refused_connectors_are_refused_at_their_line_with_the_fix(
    tmp_path: Path, connector: str, why: str
) -> None:
    path = write_model(tmp_path, connector)
    with pytest.raises(ConfigError) as caught:
        load_model(path)
    err = caught.value
    assert f"{path}:5: pd.kv_connector: '{connector}'" in err.message
    assert why in err.message
    assert err.hint is not None and "kv_connector: nixl" in err.hint


def test_sglang_keeps_its_mooncake_transfer(tmp_path: Path) -> None:
    path = tmp_path / "sglang.yaml"
    path.write_text("engine: sglang\nmodel: m\npd:\n  transfer_backend: mooncake\n")
    pd = load_model(path).pd
    assert pd is not None and pd.transfer_backend == "mooncake"


def test_lmcache_pd_is_refused_with_offload_as_its_alternative(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_model(write_model(tmp_path, "lmcache"))
    err = caught.value
    assert "ret_first_tok" in err.message and "disagg_spec" in err.message
    assert "without kv_transfer_params" in err.message
    assert err.hint is not None and "kv_offload.backend: lmcache" in err.hint


def test_lmcache_offload_keeps_loading_behind_a_nixl_pd(tmp_path: Path) -> None:
    path = tmp_path / "offload.yaml"
    path.write_text(
        "engine: vllm\nmodel: m\npd:\n  kv_connector: nixl\nkv_offload:\n  backend: lmcache\n  size_gib: 4\n"
    )
    model = load_model(path)
    assert model.kv_offload is not None and model.kv_offload.backend == "lmcache"
    assert model.pd is not None and KV_CONNECTORS[model.pd.kv_connector] == "NixlConnector"


def test_every_other_connector_loads_and_maps_to_a_class(tmp_path: Path) -> None:
    pd = load_model(write_model(tmp_path, "nixl")).pd
    assert pd is not None and pd.kv_connector in KV_CONNECTORS
    assert not set(REFUSED_KV_CONNECTORS) & set(KV_CONNECTORS)


@pytest.mark.skipif(not VLLM_FACTORY, reason="no vLLM installed at ~/.cache/infctl/vllm-venv")
def test_emitted_connectors_are_registered_and_refused_ones_are_not() -> None:
    registered = set(re.findall(r'register_connector\(\s*"(\w+)"', VLLM_FACTORY[0].read_text()))
    assert "NixlConnector" in registered  # the pattern still reads the factory
    assert set(KV_CONNECTORS.values()) <= registered
    assert "P2pNcclConnector" not in registered
    assert {"MooncakeConnector", "LMCacheConnectorV1"} <= registered  # refused for the router's sake
