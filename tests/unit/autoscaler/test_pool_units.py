"""Per-pool scale targets count only their own pool's engines: a loaded short pool scales, an idle long one
does not, from the rendered autoscaler file through the policy's load."""

from __future__ import annotations

from pathlib import Path

import yaml

from infctl.autoscaler.kubefile import parse_kube_file
from infctl.autoscaler.load import unit_load
from infctl.autoscaler.snapshot import ReplicaSignals, ScalingSnapshot
from infctl.config import load_deployment
from infctl.manifests.render import render

ROOT = Path(__file__).resolve().parents[3]


def test_each_pools_target_sees_only_its_engines() -> None:
    objs = render(load_deployment(ROOT / "profiles" / "kimi-k2-length-pools.yaml"))
    cm = next(o for o in objs if o["kind"] == "ConfigMap" and "autoscaler.yaml" in o.get("data", {}))
    kf = parse_kube_file(yaml.safe_load(cm["data"]["autoscaler.yaml"]), "autoscaler.yaml")
    units = {u.name: u for u in kf.units}
    assert {n: u.pool for n, u in units.items()} == {
        "kimi-k2-pools-short-prefill": "short",
        "kimi-k2-pools-short-decode": "short",
        "kimi-k2-pools-long-prefill": "long",
        "kimi-k2-pools-long-decode": "long",
    }
    snap = ScalingSnapshot(
        now=0.0,
        replicas=(
            ReplicaSignals("s0", "decode", queue=40, kv_usage=0.9, pool="short"),
            ReplicaSignals("s1", "decode", queue=40, kv_usage=0.9, pool="short"),
            ReplicaSignals("l0", "decode", queue=0, kv_usage=0.1, pool="long"),
        ),
    )
    policy = kf.policy()
    short = unit_load(snap, units["kimi-k2-pools-short-decode"], 2, policy)
    long = unit_load(snap, units["kimi-k2-pools-long-decode"], 1, policy)
    assert short.queue_per_replica(2) == 40 and short.needed(policy) == 10
    assert long.queue_per_replica(1) == 0 and long.needed(policy) == 1 and long.is_low(1, policy)
