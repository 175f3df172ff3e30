"""``infctl doctor -f PROFILE`` on a cluster finds the release's autoscaler by the Service render gives it
and reads its /metrics through the API server's service proxy: the fake API server (kubefake, real HTTP on
127.0.0.1) forwards to the daemon's own /metrics server."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import kmock
import kubernetes.client
import pytest

from infctl.autoscaler.metrics import AutoscalerMetrics
from infctl.autoscaler.server import MetricsServer
from infctl.autoscaler.startup import Ledger
from infctl.config import DeploymentProfile, load_deployment
from infctl.doctor.autoscaler_cluster import check_cluster_autoscaler
from infctl.doctor.result import CheckResult
from infctl.doctor.run import DoctorDeps, run_doctor
from infctl.doctor.targets import DoctorRequest
from infctl.kube import ClientSettings, KubeClient, connect
from infctl.manifests import RenderOptions, render

ROOT = Path(__file__).resolve().parents[3]
PROFILE = ROOT / "profiles" / "qwen3-8b-aggregated.yaml"  # namespace inference, autoscaler on
NS = "inference"
SCALER = "qwen3-8b-autoscaler"


def _kubefake() -> ModuleType:
    if "kubefake" not in sys.modules:  # shared with the kube, router and cutover tests, loaded once by name
        path = ROOT / "tests" / "integration" / "kube" / "kubefake.py"
        spec = importlib.util.spec_from_file_location("kubefake", path)
        assert spec is not None and spec.loader is not None
        sys.modules["kubefake"] = module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return sys.modules["kubefake"]


Factory = Callable[[], KubeClient]


@pytest.fixture
async def api() -> AsyncIterator[tuple[Any, Factory]]:
    async with _kubefake().ClusterEmulator() as emulator, kmock.Server(emulator) as server:
        emulator.serve()
        cfg = kubernetes.client.Configuration()
        cfg.host = str(server.url).rstrip("/")
        yield emulator, lambda: connect(ClientSettings(timeout_s=5), configuration=cfg)


@pytest.fixture
async def scaler() -> AsyncIterator[str]:
    """A real autoscaler /metrics server: hold 60 s, the unit that may scale to 0 started in 20 s."""
    metrics = AutoscalerMetrics(dry_run=False)
    metrics.hold_s = 60.0
    metrics.started("both", (20.0,), Ledger(desired=1, recent=(20.0,)))
    metrics.over_hold["both"] = False
    server = await MetricsServer.start("127.0.0.1", 0, metrics)
    try:
        yield server.url
    finally:
        await server.close()


def deployed(api: Any, profile: DeploymentProfile, *, components: tuple[str, ...]) -> None:
    """Store the Services render makes for ``components`` in the fake, as a deploy would leave them."""
    for obj in render(profile, RenderOptions(namespace=NS)):
        component = obj["metadata"].get("labels", {}).get("app.kubernetes.io/component")
        if obj["kind"] == "Service" and component in components:
            api.objects["v1/services", NS, obj["metadata"]["name"]] = obj


def by_name(results: list[CheckResult]) -> dict[str, CheckResult]:
    return {r.name: r for r in results if r.group == "autoscaler"}


async def test_found_through_its_service_and_checked(api, scaler) -> None:
    emulator, factory = api
    profile = load_deployment(PROFILE)
    deployed(emulator, profile, components=("router", "autoscaler"))
    emulator.endpoints[NS, SCALER] = scaler
    emulator.endpoints[NS, "qwen3-8b-router"] = "http://127.0.0.1:1"  # never asked

    found = by_name(await check_cluster_autoscaler(factory, profile))

    service = found["service"]
    assert (service.status, service.target) == ("pass", f"svc/{SCALER} -n {NS}")
    assert "port metrics" in service.summary
    startup = found["startup"]
    assert startup.status == "pass" and "20s (both)" in startup.summary and "60s" in startup.summary
    selectors = [q.get("labelSelector") for q in emulator.lists]
    assert selectors == ["infctl.io/release=qwen3-8b,app.kubernetes.io/component=autoscaler"]


async def test_doctor_f_runs_it_with_the_cluster_checks(api, scaler) -> None:
    emulator, factory = api
    profile = load_deployment(PROFILE)
    deployed(emulator, profile, components=("autoscaler",))
    emulator.endpoints[NS, SCALER] = scaler

    report = await run_doctor(DoctorRequest(profile=profile), DoctorDeps(kube=factory), timeout_s=5)

    found = by_name(list(report.results))
    assert (found["service"].status, found["startup"].status) == ("pass", "pass")


async def test_on_but_not_deployed_fails_naming_what_was_looked_for(api) -> None:
    emulator, factory = api
    profile = load_deployment(PROFILE)
    deployed(emulator, profile, components=("router",))  # another Service of the release: not taken

    found = by_name(await check_cluster_autoscaler(factory, profile))

    service = found["service"]
    assert service.status == "fail"
    assert "infctl.io/release=qwen3-8b,app.kubernetes.io/component=autoscaler" in service.summary
    assert f"namespace {NS}" in service.summary and SCALER in service.summary
    assert service.fix is not None and "infctl deploy" in service.fix
    assert found["startup"].status == "skip"


async def test_a_service_with_no_ready_pod_fails_the_startup_check(api) -> None:
    emulator, factory = api
    profile = load_deployment(PROFILE)
    deployed(emulator, profile, components=("autoscaler",))  # no endpoints: the pod is not ready

    found = by_name(await check_cluster_autoscaler(factory, profile))

    assert found["service"].status == "pass"
    startup = found["startup"]
    assert startup.status == "fail" and "503" in startup.summary and "no endpoints" in startup.summary
    assert startup.fix is not None and f"describe deploy/{SCALER}" in startup.fix


async def test_off_in_the_profile_is_said_and_not_looked_for(api) -> None:
    emulator, factory = api
    profile = load_deployment(PROFILE, ["autoscaler.enabled=false"])

    found = by_name(await check_cluster_autoscaler(factory, profile))

    (result,) = found.values()
    assert result.status == "skip" and "autoscaler.enabled: false" in result.summary
    assert emulator.lists == []


async def test_none_rendered_when_keda_scales_every_workload_is_off_too(api) -> None:
    emulator, factory = api
    keda = [
        "autoscaler.both.min=0",
        "autoscaler.scale_to_zero.after_s=600",
        "autoscaler.scale_to_zero.hold_s=300",
        "autoscaler.scale_to_zero.scaler=keda",
        "autoscaler.scale_to_zero.prometheus=http://prometheus:9090",
    ]
    profile = load_deployment(PROFILE, keda)

    (result,) = by_name(await check_cluster_autoscaler(factory, profile)).values()

    assert result.status == "skip" and "renders no autoscaler" in result.summary
    assert emulator.lists == []


async def test_an_explicit_url_wins_over_the_cluster(api, scaler) -> None:
    emulator, factory = api
    profile = load_deployment(PROFILE)
    deployed(emulator, profile, components=("autoscaler",))
    request = DoctorRequest(profile=profile, autoscaler=scaler)

    report = await run_doctor(request, DoctorDeps(kube=factory), timeout_s=5)

    found = by_name(list(report.results))
    assert set(found) == {"startup"} and found["startup"].target == scaler
    assert not any("component=autoscaler" in q.get("labelSelector", "") for q in emulator.lists)
