"""Scale-to-zero rendered from a profile: the autoscaler's targets with min 0 and their idle window, the
router holding requests for pools at zero, and a KEDA ScaledObject (checked against its CRD) for a pool KEDA
scales, which infctl's autoscaler then leaves alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from infctl.autoscaler.kubefile import parse_kube_file
from infctl.config import DeploymentProfile, load_deployment
from infctl.config.router import RouterFile
from infctl.errors import ConfigError
from infctl.manifests.options import RenderOptions
from infctl.manifests.render import render
from infctl.manifests.validate import validate_objects

ROOT = Path(__file__).resolve().parents[3]
QWEN = ROOT / "profiles" / "qwen3-8b-aggregated.yaml"
PROM = "http://prometheus-operated.monitoring.svc:9090"

Obj = dict[str, Any]


def config_file(objs: list[Obj], name: str) -> Obj:
    cm = next(o for o in objs if o["kind"] == "ConfigMap" and f"{name}.yaml" in o.get("data", {}))
    data: Obj = yaml.safe_load(cm["data"][f"{name}.yaml"])
    return data


def qwen(**fields: Any) -> DeploymentProfile:
    """The shipped aggregated Qwen3 profile with ``fields`` replaced (its bounds dropped first)."""
    base = load_deployment(QWEN)
    data = base.model_dump(exclude_unset=True, mode="json")
    data["autoscaler"].pop("both", None)
    data.pop("replicas", None)
    data["model"], data["cluster"] = base.model, base.cluster
    return DeploymentProfile.model_validate({**data, **fields})


def pools(long_zero: dict[str, Any]) -> DeploymentProfile:
    return qwen(
        length_pools=[
            {"name": "short", "max_prompt_tokens": 4096, "replicas": 2,
             "autoscaler": {"both": {"min": 1, "max": 6}}},
            {"name": "long", "replicas": 1,
             "autoscaler": {"both": {"min": 0, "max": 2}, "scale_to_zero": long_zero}},
        ],
        autoscaler={"enabled": True, "interval_s": 15, "queue_per_replica": {"up": 4, "down": 1}},
    )  # fmt: skip


def test_a_pool_scaled_to_zero_by_infctl_gets_its_window_and_the_router_holds_for_it() -> None:
    objs = render(pools({"after_s": 600, "hold_s": 240}))
    assert validate_objects(objs) == []
    scaler = parse_kube_file(config_file(objs, "autoscaler"), "autoscaler.yaml")
    units = {u.name: (u.pool, u.min, u.max, u.scale_to_zero_after_s) for u in scaler.units}
    assert units == {
        "qwen3-8b-short": ("short", 1, 6, None),
        "qwen3-8b-long": ("long", 0, 2, 600.0),
    }
    router = config_file(objs, "router")
    assert RouterFile.model_validate(router).hold_when_empty_s == 240.0
    assert scaler.file.hold_when_empty_s == 240.0  # what the pool's start-ups are checked against
    assert router.get("admission_queue", 1) >= 1  # the hold waits in the admission queue
    assert not [o for o in objs if o["kind"] == "ScaledObject"]


def test_a_pool_keda_scales_gets_a_scaled_object_on_the_router_queue_and_leaves_the_autoscaler() -> None:
    objs = render(pools({"after_s": 300, "scaler": "keda", "prometheus": PROM}))
    assert validate_objects(objs) == []  # the ScaledObject against crds/scaledobjects.yaml
    (so,) = [o for o in objs if o["kind"] == "ScaledObject"]
    spec = so["spec"]
    assert so["apiVersion"] == "keda.sh/v1alpha1"
    assert spec["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "qwen3-8b-long",
    }
    assert (spec["minReplicaCount"], spec["maxReplicaCount"], spec["cooldownPeriod"]) == (0, 2, 300)
    assert spec["pollingInterval"] == 15
    held, waiting, running = spec["triggers"]
    assert held["type"] == waiting["type"] == running["type"] == "prometheus"
    assert held["metadata"]["serverAddress"] == PROM
    assert held["metadata"]["query"].startswith("sum(infctl_router_pool_queue_depth{")
    assert 'pool="long"' in held["metadata"]["query"]
    assert 'infctl_io_workload="long"' in waiting["metadata"]["query"]
    assert "num_requests_waiting" in waiting["metadata"]["query"]
    assert held["metadata"]["activationThreshold"] == "0"  # one held request wakes the pool
    assert held["metadata"]["threshold"] == waiting["metadata"]["threshold"] == "4"
    # KEDA counts its cooldown from the last active trigger: requests running with none waiting (light
    # load) must keep the workload active, or it goes to 0 under them; they never size it (threshold).
    assert "num_requests_running" in running["metadata"]["query"]
    assert 'infctl_io_workload="long"' in running["metadata"]["query"]
    assert running["metadata"]["activationThreshold"] == "0"
    assert float(running["metadata"]["threshold"]) >= 1e6
    # infctl's autoscaler scales the other pool only; the router still holds for the long pool.
    targets = config_file(objs, "autoscaler")["targets"]
    assert [t["name"] for t in targets] == ["qwen3-8b-short"]
    assert config_file(objs, "router")["hold_when_empty_s"] == 180.0
    names = [o["kind"] for o in objs]
    assert names.index("ScaledObject") > names.index("Deployment")  # applied with the autoscaler


def test_keda_for_every_autoscaled_workload_renders_no_infctl_autoscaler() -> None:
    profile = qwen(
        replicas=1,
        autoscaler={
            "enabled": True,
            "both": {"min": 0, "max": 3},
            "scale_to_zero": {"after_s": 900, "scaler": "keda", "prometheus": PROM},
        },
    )
    objs = render(profile)
    assert validate_objects(objs) == []
    (so,) = [o for o in objs if o["kind"] == "ScaledObject"]
    assert so["spec"]["triggers"][0]["metadata"]["query"].startswith("sum(infctl_router_queue_depth{")
    assert not [o for o in objs if o["metadata"]["name"].endswith("-autoscaler")]


def test_keda_without_the_monitoring_objects_is_refused_at_render() -> None:
    profile = pools({"after_s": 300, "scaler": "keda", "prometheus": PROM})
    with pytest.raises(ConfigError, match="no-monitoring"):
        render(profile, RenderOptions(monitoring=False))


def test_a_closed_crd_rejects_a_field_keda_does_not_have() -> None:
    objs = render(pools({"after_s": 300, "scaler": "keda", "prometheus": PROM}))
    so = next(o for o in objs if o["kind"] == "ScaledObject")
    so["spec"]["minReplicas"] = 0  # the HPA's spelling, not KEDA's
    assert any("minReplicas" in p for p in validate_objects([so]))
