"""KV pools render as servers engines reach: the Mooncake master and stores or the LMCache server, the
engines' variables pointing at their Services (pod IP from the downward API), and a disk tier mounted
where the engine is told; every object passes the schema check."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from infctl.config import load_deployment
from infctl.manifests import labels as L
from infctl.manifests import render, validate_objects

ROOT = Path(__file__).resolve().parents[3]
DEEPSEEK = ROOT / "profiles" / "deepseek-v3-group.yaml"
QWEN = ROOT / "profiles" / "qwen3-8b-aggregated.yaml"


def by_name(objs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name)


def engine_container(obj: dict[str, Any]) -> dict[str, Any]:
    spec = obj["spec"]
    tpl = spec["template"] if obj["kind"] == "Deployment" else spec["leaderWorkerTemplate"]["leaderTemplate"]
    container: dict[str, Any] = tpl["spec"]["containers"][0]
    return container


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


POD_IP = {"fieldRef": {"fieldPath": "status.podIP"}}


def test_a_rendered_mooncake_pool_is_a_master_and_stores_the_engines_reach() -> None:
    objs = render(load_deployment(DEEPSEEK, ["model.kv_offload.pool.servers.replicas=3"]))
    master = by_name(objs, "Deployment", "deepseek-v3-kv-master")
    argv = engine_container(master)["command"]
    assert argv[0] == "mooncake_master" and "--enable_http_metadata_server=true" in argv
    service = by_name(objs, "Service", "deepseek-v3-kv-master")
    assert {p["port"] for p in service["spec"]["ports"]} == {50051, 8080, 9003}
    store = by_name(objs, "Deployment", "deepseek-v3-kv-store")
    assert store["spec"]["replicas"] == 3
    limits = engine_container(store)["resources"]["limits"]
    assert limits["memory"] == "258Gi" and limits["rdma/ib"] == 1
    for engine in (o for o in objs if o["kind"] == "LeaderWorkerSet"):
        env = env_of(engine_container(engine))
        assert env["MOONCAKE_MASTER"] == "deepseek-v3-kv-master.inference.svc:50051"
        assert (
            env["MOONCAKE_TE_META_DATA_SERVER"] == "http://deepseek-v3-kv-master.inference.svc:8080/metadata"
        )
        assert env["MOONCAKE_LOCAL_HOSTNAME"] == POD_IP
        assert env["MOONCAKE_GLOBAL_SEGMENT_SIZE"] == "0"
    # The pool comes up with (and before) the engines; the router never discovers it.
    names = [o["metadata"]["name"] for o in objs]
    assert names.index("deepseek-v3-kv-master") < names.index("deepseek-v3-g0-prefill")
    assert store["spec"]["template"]["metadata"]["labels"][L.COMPONENT] == "kv-pool"
    assert validate_objects(objs, "1.31") == []


def test_the_store_writes_a_config_naming_its_pod_ip_and_the_master(tmp_path: Path) -> None:
    objs = render(load_deployment(DEEPSEEK))
    script = engine_container(by_name(objs, "Deployment", "deepseek-v3-kv-store"))["command"]
    assert script[:2] == ["/bin/sh", "-c"]
    config_path = tmp_path / "store.json"
    # Run the very script, with the service started replaced by printing the file it wrote.
    text = script[2].replace("/tmp/mooncake-store.json", str(config_path)).split(" && exec ")[0]
    subprocess.run(["/bin/sh", "-c", text], env={"POD_IP": "10.1.2.3"}, check=True)
    config = json.loads(config_path.read_text())
    assert config["local_hostname"] == "10.1.2.3"
    assert config["master_server_address"] == "deepseek-v3-kv-master.inference.svc:50051"
    assert config["global_segment_size"] == 256 * 1024**3 and config["protocol"] == "rdma"


def test_an_external_pool_renders_no_servers_and_engines_use_its_address() -> None:
    objs = render(
        load_deployment(
            DEEPSEEK,
            [
                "model.kv_offload.pool.servers=null",
                "model.kv_offload.pool.address=mooncake.kv.svc:50051",
                "model.kv_offload.pool.protocol=tcp",
            ],
        )
    )
    assert not [o for o in objs if o["metadata"]["labels"].get(L.COMPONENT) == "kv-pool"]
    env = env_of(engine_container(by_name(objs, "LeaderWorkerSet", "deepseek-v3-g0-decode")))
    assert env["MOONCAKE_MASTER"] == "mooncake.kv.svc:50051"
    assert env["MOONCAKE_TE_META_DATA_SERVER"] == "P2PHANDSHAKE" and env["MOONCAKE_PROTOCOL"] == "tcp"
    assert "MOONCAKE_DEVICE" not in env


def test_an_lmcache_server_and_a_disk_tier_for_vllm() -> None:
    objs = render(
        load_deployment(
            QWEN,
            [
                "model.kv_offload.backend=lmcache",
                "model.kv_offload.size_gib=40",
                "model.kv_offload.storage_backend=lmcache",
                "model.kv_offload.pool.servers.segment_gib=100",
                "model.kv_offload.disk.size_gib=500",
                "model.kv_offload.disk.host_path=/mnt/nvme/kv",
            ],
        )
    )
    server = by_name(objs, "Deployment", "qwen3-8b-kv-server")
    container = engine_container(server)
    assert container["command"] == ["python3", "-m", "lmcache.v1.server", "0.0.0.0", "65432", "cpu"]
    assert container["image"] == "vllm/vllm-openai:v0.32.0"  # the engine's own: one LMCache release
    assert container["resources"]["limits"]["memory"] == "102Gi"
    engine = engine_container(by_name(objs, "Deployment", "qwen3-8b-engine"))
    env = env_of(engine)
    assert env["LMCACHE_REMOTE_URL"] == "lm://qwen3-8b-kv-server.inference.svc:65432"
    assert env["LMCACHE_LOCAL_DISK"] == "file:///var/cache/infctl-kv/"
    assert env["LMCACHE_MAX_LOCAL_DISK_SIZE"] == "500"
    mounts = {m["name"]: m["mountPath"] for m in engine["volumeMounts"]}
    assert mounts["kv-disk"] == "/var/cache/infctl-kv"
    pod = by_name(objs, "Deployment", "qwen3-8b-engine")["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if v["name"] == "kv-disk")
    assert volume["hostPath"] == {"path": "/mnt/nvme/kv", "type": "DirectoryOrCreate"}
    assert validate_objects(objs, "1.31") == []


def test_a_mooncake_disk_tier_turns_on_ssd_offload_on_engines_and_master() -> None:
    objs = render(
        load_deployment(DEEPSEEK, ["model.kv_offload.disk.size_gib=1000", "model.kv_offload.disk.pvc=kv-ssd"])
    )
    assert (
        "--enable_offload=true"
        in engine_container(by_name(objs, "Deployment", "deepseek-v3-kv-master"))["command"]
    )
    env = env_of(engine_container(by_name(objs, "LeaderWorkerSet", "deepseek-v3-g1-prefill")))
    assert env["MOONCAKE_ENABLE_SSD_OFFLOAD"] == "true"
    assert env["MOONCAKE_OFFLOAD_FILE_STORAGE_PATH"] == "/var/cache/infctl-kv"
    assert env["MOONCAKE_OFFLOAD_TOTAL_SIZE_LIMIT_BYTES"] == str(1000 * 1024**3)
    assert validate_objects(objs, "1.31") == []
