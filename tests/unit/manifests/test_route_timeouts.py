"""The HTTPRoute's rule timeouts: long enough for the deployment's longest request, in the Duration form the
Gateway API CRD accepts; on GKE, which refuses them, a GCPBackendPolicy's backend timeout instead."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from infctl.config import RouterFile, load_deployment
from infctl.errors import ConfigError
from infctl.manifests import RenderOptions, render, validate_objects
from infctl.manifests.route_timeouts import gateway_duration

ROOT = Path(__file__).resolve().parents[3]
QWEN = ROOT / "profiles" / "qwen3-8b-aggregated.yaml"
DURATION = re.compile(r"^([0-9]{1,5}(h|m|s|ms)){1,4}$")  # GEP-2257, as in gateway-api's CRD


def route(*overrides: str, **options: Any) -> dict[str, Any]:
    objs = render(load_deployment(QWEN, list(overrides)), RenderOptions(**options))
    found: dict[str, Any] = next(o for o in objs if o["kind"] == "HTTPRoute")
    return found


def timeouts(obj: dict[str, Any]) -> Any:
    return obj["spec"]["rules"][0].get("timeouts")


def seconds(duration: str) -> int:
    units = {"h": 3600, "m": 60, "s": 1}
    return sum(int(n) * units[u] for n, u in re.findall(r"(\d+)(h|m|s)", duration))


def test_the_route_outlasts_an_engine_drain_plus_the_routers_admission_wait() -> None:
    got = timeouts(route())
    # drain.timeout_s 600 + the router's admission deadline 30: Envoy's default 15 s would cut the stream
    assert got == {"request": "10m30s", "backendRequest": "10m30s"}
    longer = timeouts(route("drain.timeout_s=3600"))
    assert seconds(longer["request"]) == 3630


def test_a_scaled_to_zero_pool_adds_the_routers_hold() -> None:
    got = timeouts(route("autoscaler.both.min=0", "autoscaler.scale_to_zero.after_s=900",
                         "autoscaler.scale_to_zero.hold_s=300"))  # fmt: skip
    assert seconds(got["request"]) == 600 + 300


def test_an_inference_pool_route_waits_for_the_engine_alone() -> None:
    assert timeouts(route(inference_pool_epp="qwen-epp")) == {"request": "10m", "backendRequest": "10m"}


def test_every_route_keeps_the_gateway_api_rules_for_its_timeouts() -> None:
    for obj in (route(), route(old_backend="legacy/gw:80", weight=10), route("drain.timeout_s=1")):
        got = timeouts(obj)
        assert DURATION.match(got["request"]) and DURATION.match(got["backendRequest"])
        assert seconds(got["backendRequest"]) <= seconds(got["request"])  # the CRD's CEL rule
        assert validate_objects([obj]) == []


def test_the_vendored_crd_refuses_a_duration_the_api_server_would() -> None:
    bad = copy.deepcopy(route())
    bad["spec"]["rules"][0]["timeouts"]["request"] = "10 minutes"
    problems = validate_objects([bad])
    assert len(problems) == 1 and "timeouts" in problems[0] and "request" in problems[0]


def gke_policies(*overrides: str, **options: Any) -> list[dict[str, Any]]:
    objs = render(load_deployment(QWEN, list(overrides)), RenderOptions(**options))
    assert validate_objects(objs) == []  # the policy against crds/gcpbackendpolicies.yaml
    return [o for o in objs if o["kind"] == "GCPBackendPolicy"]


def test_a_gke_gateway_gets_its_backend_timeout_raised_instead_of_route_timeouts() -> None:
    obj = route("cluster.gateway=gke")
    assert "timeouts" not in obj["spec"]["rules"][0]  # GKE would not accept the route
    (policy,) = gke_policies("cluster.gateway=gke")
    assert policy["metadata"]["name"] == "qwen3-8b"
    assert policy["spec"] == {
        "targetRef": {"group": "", "kind": "Service", "name": "qwen3-8b-router"},
        "default": {"timeoutSec": 630},  # GKE's default: 30 s
    }
    (pool,) = gke_policies("cluster.gateway=gke", inference_pool_epp="qwen-epp")
    pool_ref = {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": "qwen3-8b-pool"}
    assert pool["spec"] == {"targetRef": pool_ref, "default": {"timeoutSec": 600}}
    assert gke_policies() == []  # only where the profile names GKE


@pytest.mark.parametrize("old", ["llm-gateway:80", "inference/llm-gateway:80"])
def test_on_gke_a_cutover_raises_the_old_services_timeout_too(old: str) -> None:
    """The rule's timeouts bound both backends elsewhere; on GKE the old system's Service kept 30 s."""
    new, legacy = gke_policies("cluster.gateway=gke", old_backend=old, weight=10)
    assert new["metadata"]["name"] == "qwen3-8b" and new["spec"]["default"] == {"timeoutSec": 630}
    assert legacy["metadata"] == {**new["metadata"], "name": "qwen3-8b-old-backend"}
    assert legacy["spec"] == {
        "targetRef": {"group": "", "kind": "Service", "name": "llm-gateway"},
        "default": {"timeoutSec": 630},
    }
    pool = gke_policies("cluster.gateway=gke", old_backend=old, inference_pool_epp="qwen-epp")
    assert [p["spec"]["default"]["timeoutSec"] for p in pool] == [600, 600]  # the rule's one bound
    assert gke_policies(old_backend=old) == []


def test_an_old_service_in_another_namespace_gets_no_policy_here() -> None:
    """GKE wants a GCPBackendPolicy in its Service's namespace: the old system's owner adds it there."""
    (only,) = gke_policies("cluster.gateway=gke", old_backend="legacy/llm-gateway:80")
    assert only["spec"]["targetRef"]["name"] == "qwen3-8b-router"


def test_the_vendored_gke_crd_refuses_a_timeout_gke_would() -> None:
    (policy,) = gke_policies("cluster.gateway=gke")
    policy["spec"]["default"]["timeoutSec"] = 0
    assert len(validate_objects([policy])) == 1


def test_an_unknown_gateway_is_refused_at_load() -> None:
    with pytest.raises(ConfigError, match="gateway"):
        load_deployment(QWEN, ["cluster.gateway=nginx"])


@pytest.mark.parametrize(
    ("seconds_in", "want"),
    [(45, "45s"), (600, "10m"), (630, "10m30s"), (3600, "1h"), (0.2, "1s"), (100_000, "27h46m40s")],
)
def test_durations_are_whole_seconds_in_gateway_api_form(seconds_in: float, want: str) -> None:
    assert gateway_duration(seconds_in) == want
    assert DURATION.match(want)


def test_a_duration_beyond_the_gateway_api_form_is_an_error() -> None:
    with pytest.raises(ConfigError, match="Gateway API Duration"):
        gateway_duration(100_000 * 3600)


def test_a_stopping_router_lets_its_streams_run_as_long_as_the_gateway_does() -> None:
    objs = render(load_deployment(QWEN, ["drain.timeout_s=1200"]), RenderOptions())
    cm = next(o for o in objs if o["kind"] == "ConfigMap" and "router.yaml" in o.get("data", {}))
    router = RouterFile.model_validate(yaml.safe_load(cm["data"]["router.yaml"]))
    limit = seconds(timeouts(next(o for o in objs if o["kind"] == "HTTPRoute"))["request"])
    assert router.drain_timeout_s == limit == 1230  # the router's own default, 30 s, cut a rollout's streams
    dep = next(o for o in objs if o["kind"] == "Deployment" and o["metadata"]["name"] == "qwen3-8b-router")
    grace = dep["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert grace >= 5 + limit  # the preStop hook's 5 s, then the drain
