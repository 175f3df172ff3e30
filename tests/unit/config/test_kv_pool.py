"""A pooled KV tier (Mooncake store, LMCache server) names its servers or is refused at its line with the fix;
a disk tier goes where the engine has one; the local target renders no pool servers."""

from __future__ import annotations

from pathlib import Path

import pytest

from infctl.config import load_deployment, load_model
from infctl.errors import ConfigError

SGLANG = (
    "engine: sglang\nmodel: m\nkv_offload:\n  backend: hicache\n  size_gib: 8\n  storage_backend: mooncake\n"
)
VLLM = "engine: vllm\nmodel: m\nkv_offload:\n  backend: lmcache\n  size_gib: 8\n  storage_backend: lmcache\n"


def model_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "model.yaml"
    path.write_text(text)
    return path


def refusal(path: Path) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        load_model(path)
    return caught.value


@pytest.mark.parametrize("text", [SGLANG, VLLM], ids=["mooncake", "lmcache"])
def test_a_pool_backend_without_servers_or_address_is_refused_at_its_line(tmp_path: Path, text: str) -> None:
    path = model_file(tmp_path, text)
    err = refusal(path)
    assert f"{path}:6: kv_offload.pool:" in err.message
    assert "found no pool" in err.message
    assert err.hint is not None and "servers: {segment_gib:" in err.hint and "address: HOST:PORT" in err.hint


@pytest.mark.parametrize(
    "pool",
    ["  pool:\n    servers: {replicas: 2, segment_gib: 64}\n", "  pool:\n    address: kv.example:50051\n"],
    ids=["rendered", "external"],
)
def test_a_pool_with_servers_or_an_address_loads(tmp_path: Path, pool: str) -> None:
    model = load_model(model_file(tmp_path, SGLANG + pool))
    assert model.kv_offload is not None and model.kv_offload.pool is not None


@pytest.mark.parametrize(
    ("extra", "line", "key", "words"),
    [
        (
            "  pool:\n    address: h:1\n    servers: {segment_gib: 1}\n",
            9,
            "kv_offload.pool.servers",
            "found both",
        ),
        ("  pool:\n    protocol: tcp\n", 7, "kv_offload.pool.servers", "found neither"),
        ("  pool:\n    address: nohost\n", 8, "kv_offload.pool.address", "expected host:port"),
    ],
)
def test_pool_shape_mistakes_point_at_their_key(
    tmp_path: Path, extra: str, line: int, key: str, words: str
) -> None:
    path = model_file(tmp_path, SGLANG + extra)
    err = refusal(path)
    assert f"{path}:{line}: {key}:" in err.message and words in err.message


def test_lmcache_serves_from_one_server_and_has_no_mooncake_settings(tmp_path: Path) -> None:
    pool = "  pool:\n    servers: {replicas: 2, segment_gib: 8}\n    protocol: tcp\n"
    err = refusal(model_file(tmp_path, VLLM + pool))
    assert "kv_offload.pool.servers.replicas: engines name one LMCache server, found 2" in err.message
    assert "kv_offload.pool.protocol: only meaningful with storage_backend 'mooncake'" in err.message


def test_vllm_mooncake_store_is_refused_with_lmcache_as_the_fix(tmp_path: Path) -> None:
    text = VLLM.replace("storage_backend: lmcache", "storage_backend: mooncake")
    err = refusal(model_file(tmp_path, text))
    assert (
        "kv_offload.storage_backend: 'mooncake' is not a storage backend of backend 'lmcache'" in err.message
    )
    assert err.hint is not None and "storage_backend: lmcache" in err.hint


def test_a_pool_without_a_pooled_backend_is_refused(tmp_path: Path) -> None:
    text = (
        "engine: vllm\nmodel: m\nkv_offload:\n  backend: native\n  size_gib: 8\n  pool:\n    address: h:1\n"
    )
    err = refusal(model_file(tmp_path, text))
    assert "kv_offload.pool: only used with a pooled storage_backend" in err.message


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        (SGLANG + "  pool: {address: 'h:1'}\n", True),
        (VLLM.replace("  storage_backend: lmcache\n", ""), True),
        ("engine: vllm\nmodel: m\nkv_offload:\n  backend: native\n  size_gib: 8\n", False),
        ("engine: sglang\nmodel: m\nkv_offload:\n  backend: hicache\n  size_gib: 8\n", False),
    ],
    ids=["mooncake", "lmcache", "native", "hicache-alone"],
)
def test_a_disk_tier_goes_where_the_engine_has_one(tmp_path: Path, text: str, ok: bool) -> None:
    path = model_file(tmp_path, text + "  disk: {size_gib: 100, host_path: /mnt/nvme/kv}\n")
    if ok:
        disk = load_model(path).kv_offload
        assert disk is not None and disk.disk is not None and disk.disk.size_gib == 100
    else:
        assert "kv_offload.disk:" in refusal(path).message


def test_a_disk_tier_names_one_volume(tmp_path: Path) -> None:
    path = model_file(tmp_path, VLLM.replace("  storage_backend: lmcache\n", "") + "  disk: {size_gib: 1}\n")
    assert "kv_offload.disk.host_path: expected host_path or pvc, found neither" in refusal(path).message


def test_the_local_target_refuses_pool_servers_but_not_a_running_pool(tmp_path: Path) -> None:
    (tmp_path / "model.yaml").write_text(SGLANG + "  pool:\n    servers: {segment_gib: 4}\n")
    deploy = tmp_path / "local.yaml"
    deploy.write_text(
        "name: d\ntarget: local\nmode: aggregated\nmodel: model.yaml\nlocal: {simulate: false}\n"
    )
    with pytest.raises(ConfigError) as caught:
        load_deployment(deploy)
    assert (
        "model.kv_offload.pool.servers: the local target runs engines, not KV pool servers"
        in caught.value.message
    )
    (tmp_path / "model.yaml").write_text(SGLANG + "  pool:\n    address: 127.0.0.1:50051\n")
    assert load_deployment(deploy).model.kv_offload is not None
