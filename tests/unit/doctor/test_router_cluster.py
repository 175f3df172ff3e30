"""``infctl doctor -f PROFILE`` on a cluster finds the release's router by the Service render gives it and
runs the router checks through the API server's service proxy: the fake API server (kubefake, real HTTP on
127.0.0.1) forwards to a real router in front of simulated engines."""

from __future__ import annotations

import httpx
import pytest
from proxykit import NS, PROFILE, deployed
from proxykit import by_name as grouped

from infctl.config import load_deployment
from infctl.doctor.cluster_service import Found
from infctl.doctor.proxy_transport import ServiceProxyTransport
from infctl.doctor.result import CheckResult
from infctl.doctor.router_cluster import check_cluster_router, expected_router
from infctl.doctor.run import DoctorDeps, run_doctor
from infctl.doctor.targets import DoctorRequest, RouterTarget
from infctl.router.snapshot import Backend

ROUTER = "qwen3-8b-router"
SELECTOR = "infctl.io/release=qwen3-8b,app.kubernetes.io/component=router"
T = f"svc/{ROUTER} -n {NS}"


def by_name(results: list[CheckResult]) -> dict[str, CheckResult]:
    return grouped(results, "router")


async def a_router(start_sim, start_router, **overrides) -> str:
    sims = await start_sim(instances=1)
    backends = [Backend(id=u, url=u, engine="vllm") for u in sims.urls]
    return await start_router(backends, policy="least_load", **overrides)


async def test_found_and_checked_through_the_proxy_which_cannot_carry_the_admin_token(
    api, start_sim, start_router
) -> None:
    emulator, factory = api
    profile = load_deployment(PROFILE)
    deployed(emulator, profile, components=("router", "autoscaler"))
    emulator.endpoints[NS, ROUTER] = await a_router(start_sim, start_router, admin_token="s3cret")

    found = by_name(await check_cluster_router(factory, profile))

    assert (found["service"].status, found["service"].target) == ("pass", T)
    assert "port http" in found["service"].summary
    assert found["health"].status == "pass" and found["ready"].status == "pass"
    # No token reaches the router through the API server: its admin API refuses, as it should.
    assert found["admin"].status == "pass" and "requires a bearer token" in found["admin"].summary
    backends = found["backends"]
    assert backends.status == "warn" and "not checked" in backends.summary
    fix = backends.fix or ""
    assert "drops the Authorization header" in fix
    assert f"kubectl -n {NS} port-forward svc/{ROUTER} 8000 &" in fix
    assert f"kubectl get secret {ROUTER}-admin -n {NS}" in fix and "needs get on secrets" in fix
    assert "infctl doctor --router http://127.0.0.1:8000" in fix
    assert {r.target for r in found.values()} == {T}
    assert [q.get("labelSelector") for q in emulator.lists] == [SELECTOR]


async def test_an_open_admin_api_is_read_through_the_proxy_and_flagged(api, start_sim, start_router) -> None:
    emulator, factory = api
    profile = load_deployment(PROFILE)
    deployed(emulator, profile, components=("router",))
    emulator.endpoints[NS, ROUTER] = await a_router(start_sim, start_router)

    found = by_name(await check_cluster_router(factory, profile))

    # Reached by everyone in the cluster: a failure, not the loopback warning.
    assert found["admin"].status == "fail" and "answers without a token" in found["admin"].summary
    assert found["backends"].status == "pass" and "1 in rotation" in found["backends"].summary
    assert found["policy"].status in ("pass", "warn")
    # POST /tokenize went through the proxy with its body; the engine's own is not reachable from here.
    tokens = found["tokens"]
    assert tokens.status == "skip" and "router counts by words" in tokens.summary


async def test_doctor_f_runs_it_with_the_cluster_checks(api, start_sim, start_router) -> None:
    emulator, factory = api
    profile = load_deployment(PROFILE)
    deployed(emulator, profile, components=("router",))
    emulator.endpoints[NS, ROUTER] = await a_router(start_sim, start_router, admin_token="s3cret")

    report = await run_doctor(DoctorRequest(profile=profile), DoctorDeps(kube=factory), timeout_s=5)

    found = by_name(list(report.results))
    assert (found["service"].status, found["health"].status) == ("pass", "pass")


async def test_on_but_not_deployed_fails_naming_what_was_looked_for(api) -> None:
    emulator, factory = api
    profile = load_deployment(PROFILE)
    deployed(emulator, profile, components=("autoscaler",))  # another Service of the release: not taken

    found = by_name(await check_cluster_router(factory, profile))

    service = found["service"]
    assert service.status == "fail" and SELECTOR in service.summary and ROUTER in service.summary
    assert service.summary.startswith("router on,") and f"namespace {NS}" in service.summary
    assert service.fix is not None and "infctl deploy" in service.fix
    assert found["health"].status == "skip" and set(found) == {"service", "health"}


async def test_a_service_with_no_ready_pod_fails_health_saying_why_a_router_is_not_ready(api) -> None:
    emulator, factory = api
    profile = load_deployment(PROFILE)
    deployed(emulator, profile, components=("router",))  # no endpoints: no router pod is ready

    found = by_name(await check_cluster_router(factory, profile))

    assert found["service"].status == "pass"
    health = found["health"]
    assert health.status == "fail" and "503" in health.summary and "no endpoints" in health.summary
    assert health.fix is not None and f"describe deploy/{ROUTER}" in health.fix
    assert "infctl.io/release=qwen3-8b,app.kubernetes.io/component=engine" in health.fix
    assert set(found) == {"service", "health"}


async def test_a_user_without_services_proxy_is_told_so_and_how_to_port_forward(api) -> None:
    emulator, factory = api
    profile = load_deployment(PROFILE)
    deployed(emulator, profile, components=("router",))
    emulator.endpoints[NS, ROUTER] = "http://127.0.0.1:1"  # never reached: RBAC refuses first
    emulator.proxy_denied.add(NS)

    found = by_name(await check_cluster_router(factory, profile))

    health = found["health"]
    assert health.status == "fail" and "403" in health.summary and '"services/proxy"' in health.summary
    fix = health.fix or ""
    assert "may not get services/proxy" in fix and f"port-forward svc/{ROUTER} 8000 &" in fix
    assert "infctl doctor --router http://127.0.0.1:8000" in fix


async def test_off_in_the_profile_is_said_and_not_looked_for(api) -> None:
    emulator, factory = api
    profile = load_deployment(PROFILE, ["router.enabled=false"])

    (result,) = by_name(await check_cluster_router(factory, profile)).values()

    assert result.status == "skip" and "router.enabled: false" in result.summary
    assert "off in profile qwen3-8b" in result.summary
    assert emulator.lists == []


async def test_an_explicit_url_wins_over_the_cluster(api, start_sim, start_router) -> None:
    emulator, factory = api
    profile = load_deployment(PROFILE)
    deployed(emulator, profile, components=("router",))
    url = await a_router(start_sim, start_router, admin_token="s3cret")
    request = DoctorRequest(profile=profile, router=RouterTarget(url, "s3cret"))

    report = await run_doctor(request, DoctorDeps(kube=factory), timeout_s=5)

    found = by_name(list(report.results))
    assert "service" not in found and found["health"].target == url
    assert found["backends"].status == "pass"  # the token went straight to the router
    assert not any("component=router" in q.get("labelSelector", "") for q in emulator.lists)


async def test_the_transport_reaches_only_the_service_it_was_given(api) -> None:
    _, factory = api
    want = expected_router(load_deployment(PROFILE), NS)
    assert not isinstance(want, str)
    client = factory()
    try:
        base = f"http://{ROUTER}.{NS}.svc:8000"
        transport = ServiceProxyTransport(client, Found(want, NS, ROUTER), base)
        async with httpx.AsyncClient(transport=transport) as http:
            with pytest.raises(httpx.ConnectError, match="not reachable through the API server"):
                await http.get("http://10.0.0.7:8000/tokenize")
            # The Service is not stored: the API server's own 404 comes back as the answer.
            assert (await http.get(f"{base}/health")).status_code == 404
    finally:
        client.close()
