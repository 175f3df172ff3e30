"""Engine pods stop without cutting requests: a preStop hook that waits for the engine (a worker: its
leader), a grace period to match, and an autoscaler allowed to mark the pods it removes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from infctl.config import load_deployment
from infctl.engines import get_adapter
from infctl.manifests.drain import LEADER
from infctl.manifests.render import render

ROOT = Path(__file__).resolve().parents[3]
PROFILES = ["deepseek-v3-group.yaml", "kimi-k2-pool.yaml", "qwen3-8b-aggregated.yaml"]


def pod_specs(obj: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    if obj["kind"] == "Deployment":
        return [("leader", obj["spec"]["template"]["spec"])]
    lwt = obj["spec"]["leaderWorkerTemplate"]
    return [("leader", lwt["leaderTemplate"]["spec"]), ("worker", lwt["workerTemplate"]["spec"])]


def test_every_engine_container_waits_for_its_engine_within_the_grace_period() -> None:
    for name in PROFILES:
        profile = load_deployment(ROOT / "profiles" / name, ["drain.timeout_s=900", "drain.settle_s=7"])
        metrics = get_adapter(profile.model.engine).signal_metrics
        engines = [
            o
            for o in render(profile)
            if o["kind"] in ("Deployment", "LeaderWorkerSet")
            and o["metadata"]["labels"]["app.kubernetes.io/component"] == "engine"
        ]
        assert engines
        for obj in engines:
            for kind, spec in pod_specs(obj):
                assert spec["terminationGracePeriodSeconds"] == 7 + 900 + 30
                (container,) = spec["containers"]
                command = container["lifecycle"]["preStop"]["exec"]["command"]
                assert command[:2] == ["python3", "-c"]
                compile(command[2], "<preStop>", "exec")  # the script the image's python runs
                host = "127.0.0.1" if kind == "leader" else LEADER
                waited = [metrics.running, *metrics.queues, *metrics.busy]
                assert command[3:] == [host, "8000", "7", "900", *waited]


def test_the_autoscaler_may_read_its_workloads_and_mark_pods() -> None:
    objs = render(load_deployment(ROOT / "profiles" / "kimi-k2-pool.yaml"))
    role = next(o for o in objs if o["kind"] == "Role" and o["metadata"]["name"].endswith("-autoscaler"))
    rules = {(r["resources"][0], tuple(r["verbs"])) for r in role["rules"]}
    assert ("leaderworkersets/scale", ("get", "update", "patch")) in rules
    assert ("leaderworkersets", ("get",)) in rules
    assert ("pods", ("get", "list", "patch")) in rules
    cm = next(o for o in objs if o["kind"] == "ConfigMap" and "autoscaler.yaml" in o.get("data", {}))
    assert yaml.safe_load(cm["data"]["autoscaler.yaml"])["drain_timeout_s"] == 600
