"""Every shipped Kubernetes profile renders engines that would start: each container's command line uses only
flags its image's engine release has (read back from the rendered objects, not from the renderer's own check),
and an engine using a KV pool is given its variables and finds a Service with a server behind it at that
address and port."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from infctl.config import load_deployment
from infctl.engines import get_adapter, kv_pool
from infctl.engines.versions import image_version, lacking
from infctl.manifests import labels as L
from infctl.manifests import render
from infctl.manifests.kv_pool import with_pool_address

ROOT = Path(__file__).resolve().parents[3]
PROFILES = [p for p in sorted((ROOT / "profiles").glob("*.yaml")) if "target: kubernetes" in p.read_text()]


def pod_templates(obj: dict[str, Any]) -> list[dict[str, Any]]:
    if obj["kind"] == "Deployment":
        return [obj["spec"]["template"]]
    lwt = obj["spec"]["leaderWorkerTemplate"]
    return [lwt["leaderTemplate"], lwt["workerTemplate"]]


def engine_pods(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        tpl
        for o in objs
        if o["kind"] in ("Deployment", "LeaderWorkerSet") and o["metadata"]["labels"][L.COMPONENT] == "engine"
        for tpl in pod_templates(o)
    ]


def argv_of(container: dict[str, Any]) -> list[str]:
    command: list[str] = container["command"]
    # Multi-node pods run `/bin/sh -c "exec <argv> <suffix>"`: the words are the argv.
    return command[2].split() if command[:2] == ["/bin/sh", "-c"] else command


@pytest.mark.parametrize("path", PROFILES, ids=lambda p: p.stem)
def test_every_engine_flag_is_in_its_images_release(path: Path) -> None:
    profile = load_deployment(path)
    adapter = get_adapter(profile.model.engine)
    pods = engine_pods(render(profile))
    assert pods
    for tpl in pods:
        container = tpl["spec"]["containers"][0]
        version = image_version(container["image"])
        assert version is not None, f"{container['image']}: pin a release, not a floating tag"
        assert version >= adapter.oldest_checked
        assert lacking(argv_of(container), adapter.flag_versions, version) == []


@pytest.mark.parametrize("path", PROFILES, ids=lambda p: p.stem)
def test_an_engine_using_a_pool_reaches_a_rendered_server(path: Path) -> None:
    profile = load_deployment(path)
    objs = render(profile)
    namespace = profile.namespace or "default"
    model = with_pool_address(profile, namespace).model
    wanted = kv_pool.client_env(model)
    endpoints = kv_pool.endpoints(model)
    if kv_pool.pool_kind(model) is None:
        assert not wanted and not [o for o in objs if o["metadata"]["labels"].get(L.COMPONENT) == "kv-pool"]
        return
    assert endpoints and wanted
    for tpl in engine_pods(objs):
        env = {e["name"]: e.get("value", e.get("valueFrom")) for e in tpl["spec"]["containers"][0]["env"]}
        assert {k: env.get(k) for k in wanted} == wanted
        for name in kv_pool.client_pod_ip_env(model):
            assert env[name] == {"fieldRef": {"fieldPath": "status.podIP"}}
    rendered = {o["metadata"]["name"]: o for o in objs if o["kind"] == "Service"}
    servers = [
        o for o in objs if o["kind"] == "Deployment" and o["metadata"]["labels"][L.COMPONENT] == "kv-pool"
    ]
    for ep in endpoints:
        name, _, rest = ep.host.partition(".")
        assert rest == f"{namespace}.svc", ep
        service = rendered[name]
        assert ep.port in [p["port"] for p in service["spec"]["ports"]]
        selector = service["spec"]["selector"].items()
        backing = [d for d in servers if selector <= d["spec"]["template"]["metadata"]["labels"].items()]
        assert len(backing) == 1 and backing[0]["spec"]["replicas"] >= 1
        ports = [p["containerPort"] for p in backing[0]["spec"]["template"]["spec"]["containers"][0]["ports"]]
        assert ep.port in ports


def test_a_shipped_profile_uses_a_rendered_pool() -> None:
    """The check above is not vacuous: DeepSeek-V3's Mooncake store is rendered."""
    model = load_deployment(ROOT / "profiles" / "deepseek-v3-group.yaml").model
    assert kv_pool.pool_kind(model) == "mooncake"
