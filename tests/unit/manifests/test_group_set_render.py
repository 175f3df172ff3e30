"""PD groups placed whole by LeaderWorkerSet exclusive topology or Kueue topology-aware scheduling: every
group one LWS group (each engine replica a subgroup), validated against the shipped CRD schemas; the pod
command, run by a real /bin/sh, starts pod i as engine i // n at rank i % n, meeting its replica's rank 0."""

from __future__ import annotations

import http.server
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from infctl.config import DeploymentProfile, load_deployment
from infctl.errors import ConfigError
from infctl.manifests import labels as L
from infctl.manifests.group_set import (
    KUEUE_PODSET_GROUP,
    KUEUE_PREFERRED,
    KUEUE_QUEUE,
    KUEUE_REQUIRED,
    LAYOUT,
    LWS_EXCLUSIVE,
    LWS_SUBGROUP_EXCLUSIVE,
)
from infctl.manifests.options import RenderOptions
from infctl.manifests.render import render
from infctl.manifests.validate import validate_objects

ROOT = Path(__file__).resolve().parents[3]
DEEPSEEK = ROOT / "profiles" / "deepseek-v3-group.yaml"
BLOCK = "network.topology.nvidia.com/block"
CLIQUE = "nvidia.com/gpu.clique"


def with_gang(path: Path, gang: dict[str, Any], *overrides: str) -> DeploymentProfile:
    profile = load_deployment(path, list(overrides))
    assert profile.cluster is not None
    cluster = profile.cluster.model_validate({**profile.cluster.model_dump(exclude_unset=True), "gang": gang})
    return profile.model_copy(update={"cluster": cluster})


def vllm_groups(gang: dict[str, Any]) -> DeploymentProfile:
    """vLLM with NIXL, one-GPU replicas (n = 1): 2 groups of 2 prefill + 1 decode."""
    cluster = load_deployment(DEEPSEEK).cluster
    assert cluster is not None
    return DeploymentProfile.model_validate(
        {
            "name": "llama",
            "namespace": "inference",
            "mode": "group",
            "groups": 2,
            "group": {"prefill": 2, "decode": 1},
            "model": {
                "engine": "vllm",
                "model": "meta-llama/Llama-3.1-8B-Instruct",
                "served_model_name": "llama3-8b",
                "pd": {"kv_connector": "nixl"},
            },
            "cluster": {**cluster.model_dump(exclude_unset=True), "gang": gang},
        }
    )


def sets(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == "LeaderWorkerSet"]


def templates(lws: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    t = lws["spec"]["leaderWorkerTemplate"]
    return t["leaderTemplate"], t["workerTemplate"]


def test_lws_exclusive_topology_makes_every_group_one_lws_group_of_subgroups() -> None:
    objs = render(with_gang(DEEPSEEK, {"scheduler": "lws", "subgroup_topology": CLIQUE}, "groups=3"))
    assert validate_objects(objs) == []
    engines = [o for o in objs if o["metadata"]["labels"].get(L.COMPONENT) == "engine"]
    assert sorted(o["kind"] for o in engines) == ["LeaderWorkerSet", "PodDisruptionBudget", "Service"]
    (lws,) = sets(objs)
    assert lws["metadata"]["name"] == "deepseek-v3-pd"
    assert lws["metadata"]["annotations"] == {LWS_EXCLUSIVE: BLOCK, LWS_SUBGROUP_EXCLUSIVE: CLIQUE}
    spec = lws["spec"]
    # 3 groups of 1 prefill + 2 decode replicas, 2 nodes each: a group is 6 pods, a replica a subgroup of 2.
    assert spec["replicas"] == 3
    assert spec["leaderWorkerTemplate"]["size"] == 6
    assert spec["leaderWorkerTemplate"]["subGroupPolicy"] == {"subGroupSize": 2}
    for tpl in templates(lws):
        meta = tpl["metadata"]
        assert meta["annotations"][LAYOUT] == "prefill=1,decode=2,nodes=2"
        assert L.ROLE not in meta["labels"] and L.GROUP not in meta["labels"]
        assert meta["labels"][L.SERVES] == "http"
        # LWS injects the exclusive affinity itself; a group affinity of infctl's would fight it.
        assert "affinity" not in tpl["spec"]
    leader, worker = templates(lws)
    assert "httpGet" in leader["spec"]["containers"][0]["readinessProbe"]
    # A worker pod is a replica's rank 0 or another rank: its probe passes for ranks serving no HTTP.
    assert "exec" in worker["spec"]["containers"][0]["readinessProbe"]
    ports = {p["name"] for p in worker["spec"]["containers"][0]["ports"]}
    assert {"http", "dist", "bootstrap"} <= ports
    # The engine Service selects the set's pods.
    svc = next(o for o in objs if o["kind"] == "Service" and o["metadata"]["name"] == "deepseek-v3-pd")
    assert svc["spec"]["selector"] == {L.RELEASE: "deepseek-v3", L.WORKLOAD: "pd"}
    # A replica's rank 0 is found by DNS before it is ready (the other ranks wait for it there).
    assert svc["spec"]["publishNotReadyAddresses"] is True


@pytest.mark.parametrize("topology", ["required", "preferred"])
def test_kueue_admits_each_group_whole_under_one_switch(topology: str) -> None:
    gang = {"scheduler": "kueue", "queue_name": "serving", "topology": topology}
    objs = render(with_gang(DEEPSEEK, gang))
    assert validate_objects(objs) == []
    (lws,) = sets(objs)
    assert lws["metadata"]["labels"][KUEUE_QUEUE] == "serving"
    assert "annotations" not in lws["metadata"]  # no LWS exclusive placement: Kueue places the group
    key, other = (
        (KUEUE_REQUIRED, KUEUE_PREFERRED) if topology == "required" else (KUEUE_PREFERRED, KUEUE_REQUIRED)
    )
    for tpl in templates(lws):
        ann = tpl["metadata"]["annotations"]
        assert ann[key] == BLOCK and other not in ann
        # One podset group: leader and workers (the whole PD group) in one switch domain.
        assert ann[KUEUE_PODSET_GROUP] == "deepseek-v3-pd"
        assert "schedulerName" not in tpl["spec"]


def test_kueue_refuses_a_name_too_long_for_its_pod_group_label() -> None:
    long = with_gang(
        DEEPSEEK, {"scheduler": "kueue", "queue_name": "q"}, "name=deepseek-v3-0324-production-us-east-1"
    )
    with pytest.raises(ConfigError, match="39"):
        render(long)
    assert sets(
        render(with_gang(DEEPSEEK, {"scheduler": "lws"}, "name=deepseek-v3-0324-production-us-east-1"))
    )


def test_kueue_needs_a_local_queue() -> None:
    with pytest.raises(ValueError, match="queue_name"):
        with_gang(DEEPSEEK, {"scheduler": "kueue"})
    with pytest.raises(ValueError, match="only used with scheduler lws"):
        with_gang(DEEPSEEK, {"scheduler": "kueue", "queue_name": "q", "subgroup_topology": CLIQUE})


def test_the_crd_schema_refuses_what_lws_does_not_know() -> None:
    (lws,) = sets(render(with_gang(DEEPSEEK, {"scheduler": "lws"})))
    lws["spec"]["leaderWorkerTemplate"]["subGroupPolicy"]["subGroupPolicyType"] = "PerRole"
    assert any("subGroupPolicyType" in p for p in validate_objects([lws]))
    del lws["spec"]["leaderWorkerTemplate"]["subGroupPolicy"]["subGroupPolicyType"]
    lws["spec"]["leaderWorkerTemplate"]["subGroupPolicy"]["subGroupCount"] = 3
    assert any("subGroupCount" in p for p in validate_objects([lws]))


def test_length_pools_get_a_set_each() -> None:
    profile = with_gang(DEEPSEEK, {"scheduler": "lws"})
    data = profile.model_dump(exclude_unset=True, mode="json")
    data.pop("groups", None)
    data["model"], data["cluster"] = profile.model, profile.cluster
    data["length_pools"] = [
        {"name": "short", "max_prompt_tokens": 2048, "groups": 2},
        {"name": "long", "groups": 1, "group": {"prefill": 2, "decode": 1}},
    ]
    objs = render(DeploymentProfile.model_validate(data))
    assert validate_objects(objs) == []
    by_name = {o["metadata"]["name"]: o for o in sets(objs)}
    assert sorted(by_name) == ["deepseek-v3-long-pd", "deepseek-v3-short-pd"]
    assert by_name["deepseek-v3-short-pd"]["spec"]["replicas"] == 2
    long_leader, _ = templates(by_name["deepseek-v3-long-pd"])
    assert long_leader["metadata"]["annotations"][LAYOUT] == "prefill=2,decode=1,nodes=2"
    assert long_leader["metadata"]["labels"][L.POOL] == "long"


def test_per_role_autoscaling_is_refused_with_a_set() -> None:
    profile = with_gang(DEEPSEEK, {"scheduler": "lws"})
    scaler = profile.autoscaler.model_validate({"enabled": True, "decode": {"min": 1, "max": 4}})
    with pytest.raises(ConfigError, match="per-role bounds"):
        render(profile.model_copy(update={"autoscaler": scaler}))


def run_pod(command: list[str], index: int, leader: str, tmp_path: Path) -> list[str]:
    """Run a pod's command as the container would (after Kubernetes's own $(VAR) expansion of POD_IP),
    with a python3 and a vllm on PATH that print the argv they were started with."""
    for program in ("python3", "vllm"):
        fake = tmp_path / program
        fake.write_text('#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done\n')
        fake.chmod(0o755)
    env = {
        "PATH": f"{tmp_path}:/usr/bin:/bin",
        "LWS_WORKER_INDEX": str(index),
        "LWS_LEADER_ADDRESS": leader,
    }
    argv = [c.replace("$(POD_IP)", "10.1.2.3") for c in command]
    out = subprocess.run(argv, env=env, capture_output=True, text=True, check=True, cwd=os.getcwd())
    return out.stdout.splitlines()


def after(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


def test_each_pod_runs_its_engine_at_its_rank_meeting_its_own_replica(tmp_path: Path) -> None:
    (lws,) = sets(render(with_gang(DEEPSEEK, {"scheduler": "lws"})))
    leader_tpl, worker_tpl = templates(lws)
    lead = "deepseek-v3-pd-1.deepseek-v3-pd.inference"  # group 1's leader pod, as LWS names it
    # (worker index, role, rank within the replica, rank 0's address)
    expected = [
        (0, "prefill", "0", lead),
        (1, "prefill", "1", lead),
        (2, "decode", "0", "deepseek-v3-pd-1-2.deepseek-v3-pd.inference"),
        (3, "decode", "1", "deepseek-v3-pd-1-2.deepseek-v3-pd.inference"),
        (4, "decode", "0", "deepseek-v3-pd-1-4.deepseek-v3-pd.inference"),
        (5, "decode", "1", "deepseek-v3-pd-1-4.deepseek-v3-pd.inference"),
    ]
    for index, role, rank, address in expected:
        tpl = leader_tpl if index == 0 else worker_tpl
        args = run_pod(tpl["spec"]["containers"][0]["command"], index, lead, tmp_path)
        assert after(args, "--disaggregation-mode") == role
        assert after(args, "--node-rank") == rank
        assert after(args, "--dist-init-addr") == f"{address}:20000"
        assert ("--disaggregation-bootstrap-port" in args) == (role == "prefill")
        assert "kv@10.1.2.3@deepseek-v3" in after(args, "--kv-events-config")


def test_one_node_replicas_are_one_pod_each(tmp_path: Path) -> None:
    objs = render(vllm_groups({"scheduler": "lws"}))
    assert validate_objects(objs) == []
    (lws,) = sets(objs)
    assert lws["spec"]["replicas"] == 2
    assert lws["spec"]["leaderWorkerTemplate"]["size"] == 3
    assert lws["spec"]["leaderWorkerTemplate"]["subGroupPolicy"] == {"subGroupSize": 1}
    _, worker = templates(lws)
    assert "httpGet" in worker["spec"]["containers"][0]["readinessProbe"]  # every pod serves HTTP
    roles = []
    for index in range(3):
        args = run_pod(worker["spec"]["containers"][0]["command"], index, "llama-pd-0.llama-pd.x", tmp_path)
        config = after(args, "--kv-transfer-config")
        roles.append("producer" if "kv_producer" in config else "consumer")
        assert "--data-parallel-address" not in args  # no rendezvous for one-node replicas
    assert roles == ["producer", "producer", "consumer"]


def test_an_inference_pool_is_refused_for_a_set() -> None:
    profile = with_gang(DEEPSEEK, {"scheduler": "lws"})
    with pytest.raises(ConfigError, match="no role label"):
        render(profile, RenderOptions(inference_pool_epp="epp"))


class Engine(http.server.BaseHTTPRequestHandler):
    """An engine's /health, and /metrics busy for the first ``busy`` scrapes."""

    busy = 0

    def do_GET(self) -> None:
        if self.path == "/metrics":
            running = 1 if Engine.busy > 0 else 0
            Engine.busy -= 1
            labels = '{model_name="deepseek-v3"}'  # as SGLang labels them
            text = f"sglang:num_running_reqs{labels} {running}\nsglang:num_queue_reqs{labels} 0\n"
            body = text.encode()
        else:
            body = b""
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def engine() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Engine)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def worker_container() -> dict[str, Any]:
    (lws,) = sets(render(with_gang(DEEPSEEK, {"scheduler": "lws"})))
    return templates(lws)[1]["spec"]["containers"][0]


def run_hook(command: list[str], index: int, leader: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LWS_WORKER_INDEX": str(index), "LWS_LEADER_ADDRESS": leader}
    argv = [sys.executable, *command[1:]]  # the image's python3
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30)


def test_a_worker_probe_checks_http_on_rank0_only(engine: int) -> None:
    probe = worker_container()["readinessProbe"]["exec"]["command"]
    assert probe[3:6] == ["2", "8000", "/health"]
    probe = [*probe[:4], str(engine), *probe[5:]]
    assert run_hook(probe, 2, "x").returncode == 0  # rank 0 of the first decode replica, serving
    probe_down = [*probe[:4], "1", *probe[5:]]  # nothing listens on port 1
    assert run_hook(probe_down, 2, "x").returncode != 0
    assert run_hook(probe_down, 3, "x").returncode == 0  # rank 1 serves no HTTP: nothing to check


def test_a_worker_prestop_waits_for_its_own_replicas_rank0(engine: int) -> None:
    hook = worker_container()["lifecycle"]["preStop"]["exec"]["command"]
    assert hook[3] == "lws-subgroup:2"
    # port, settle 0 s, timeout 20 s; the metric names stay as rendered.
    hook = [*hook[:4], str(engine), "0", "20", *hook[7:]]
    # Pod 1 is rank 1 of the first prefill replica, whose rank 0 is the LWS leader. With the leader's
    # address at 127.0.0.1 (LWS's name form: <pod>.<rest>), the hook waits for that engine to go idle.
    Engine.busy = 3
    assert run_hook(hook, 1, "127.0.0.1").returncode == 0
    assert Engine.busy < 0  # it scraped through the busy answers and then two idle ones
    # Pod 3's rank 0 is pod 2, "<leader>-2.<rest>": here a name that does not resolve, so nothing to wait for.
    Engine.busy = 3
    assert run_hook(hook, 3, "127.0.0.1").returncode == 0
    assert Engine.busy == 3


def relabel(rules: list[dict[str, Any]], labels: dict[str, str]) -> dict[str, str] | None:
    """Prometheus's relabeling (replace and drop): source labels joined by ';', the regex anchored, $1 the
    first group. None when the target is dropped."""
    out = dict(labels)
    for r in rules:
        value = ";".join(out.get(k, "") for k in r["sourceLabels"])
        m = re.fullmatch(r["regex"], value)
        if r["action"] == "drop":
            if m:
                return None
        elif m:
            out[r["targetLabel"]] = r["replacement"].replace("$1", m.group(1) if m.groups() else "")
    return out


def test_the_pod_monitor_scrapes_each_replicas_rank0_with_its_role_and_group() -> None:
    objs = render(with_gang(DEEPSEEK, {"scheduler": "lws"}))
    monitor = next(o for o in objs if o["kind"] == "PodMonitor")
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    meta = "__meta_kubernetes_pod_label_"
    seen = {}
    for index in range(6):
        pod = {
            f"{meta}infctl_io_workload": "pd",
            f"{meta}leaderworkerset_sigs_k8s_io_worker_index": str(index),
            f"{meta}leaderworkerset_sigs_k8s_io_group_index": "1",
        }
        target = relabel(endpoint["relabelings"], pod)
        seen[index] = None if target is None else (target["infctl_io_role"], target["infctl_io_group"])
    assert seen == {
        0: ("prefill", "g1"),
        1: None,
        2: ("decode", "g1"),
        3: None,
        4: ("decode", "g1"),
        5: None,
    }
    # Pods of other workloads are left as they are.
    other = {f"{meta}infctl_io_workload": "router", f"{meta}leaderworkerset_sigs_k8s_io_worker_index": "1"}
    assert relabel(endpoint["relabelings"], other) == other
    plain = render(load_deployment(DEEPSEEK))
    assert (
        "relabelings"
        not in next(o for o in plain if o["kind"] == "PodMonitor")["spec"]["podMetricsEndpoints"][0]
    )
