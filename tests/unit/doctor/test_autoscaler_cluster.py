"""``infctl doctor -f PROFILE`` on a cluster finds the release's autoscaler by the Service render gives it
and reads its /metrics through the API server's service proxy: the fake API server (kubefake, real HTTP on
127.0.0.1) forwards to the daemon's own /metrics server."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from proxykit import NS, PROFILE, deployed
from proxykit import by_name as grouped

from infctl.autoscaler.metrics import AutoscalerMetrics
from infctl.autoscaler.server import MetricsServer
from infctl.autoscaler.startup import Ledger
from infctl.config import load_deployment
from infctl.doctor.autoscaler_cluster import check_cluster_autoscaler
from infctl.doctor.result import CheckResult
from infctl.doctor.run import DoctorDeps, run_doctor
from infctl.doctor.targets import DoctorRequest

SCALER = "qwen3-8b-autoscaler"


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


def by_name(results: list[CheckResult]) -> dict[str, CheckResult]:
    return grouped(results, "autoscaler")


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
    assert set(found) == {"startup", "memory"} and found["startup"].target == scaler
    assert not any("component=autoscaler" in q.get("labelSelector", "") for q in emulator.lists)
