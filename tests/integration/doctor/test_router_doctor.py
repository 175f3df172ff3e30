"""Router checks against a live router in front of simulated engines."""

from __future__ import annotations

import asyncio

import httpx

from infctl.doctor.result import CheckResult
from infctl.doctor.router_eval import evaluate_admin_auth
from infctl.doctor.router_probe import check_router
from infctl.doctor.targets import RouterTarget
from infctl.router.snapshot import Backend
from infctl.telemetry import make_client


async def doctor(url: str, token: str | None = None) -> dict[str, list[CheckResult]]:
    async with make_client(timeout=5.0) as client:
        results = await check_router(client, RouterTarget(url, token))
    out: dict[str, list[CheckResult]] = {}
    for r in results:
        out.setdefault(r.name, []).append(r)
    return out


async def settle(url: str, until: str, seconds: float = 30.0, token: str | None = None) -> None:
    """Poll the admin API until ``until`` holds ('ejected' or 'scraped') for some/all backends, for at most
    ``seconds`` (generous: a loaded 2-core machine probes and scrapes late)."""
    headers = {"authorization": f"Bearer {token}"} if token else None
    deadline = asyncio.get_running_loop().time() + seconds
    async with httpx.AsyncClient(headers=headers) as client:
        while asyncio.get_running_loop().time() < deadline:
            rows = (await client.get(f"{url}/admin/backends")).json()["backends"]
            if until == "ejected" and any(b["ejected"] for b in rows):
                return
            if until == "scraped" and all(b["signals_age_s"] is not None for b in rows):
                return
            await asyncio.sleep(0.05)
    raise AssertionError(f"router never got {until}")


async def test_healthy_router_passes(start_sim, start_router) -> None:
    sims = await start_sim(instances=2)
    backends = [Backend(id=u, url=u, engine="vllm") for u in sims.urls]
    # Signals fresh for 30 s: with the default 0.2 s a scrape late on a loaded machine makes the freshness
    # check warn, and this test asserts every check passes.
    policy = {"preset": "cache_aware", "settings": {"stale_after_s": 30.0}}
    url = await start_router(backends, policy=policy, admin_token="s3cret")
    await settle(url, "scraped", token="s3cret")
    found = await doctor(url, "s3cret")
    assert {r.status for rs in found.values() for r in rs} == {"pass"}, found
    assert "2 in rotation" in found["backends"][0].summary
    assert "requires a bearer token" in found["admin"][0].summary


async def test_an_open_admin_api_is_flagged(start_sim, start_router) -> None:
    sims = await start_sim(instances=1)
    url = await start_router([Backend(id=u, url=u, engine="vllm") for u in sims.urls])
    for token in (None, "unused"):  # with a token of its own, doctor still asks once without one
        (admin,) = (await doctor(url, token))["admin"]
        assert admin.status == "warn"  # 127.0.0.1: every local user reaches it
        assert "answers without a token" in admin.summary and admin.fix is not None
    # Reached at a routable address the same router is a failure (pure verdict on what it answered).
    (verdict,) = [evaluate_admin_auth(200, "http://10.0.0.7:8000")]
    assert verdict is not None and verdict.status == "fail"
    assert evaluate_admin_auth(401, "http://10.0.0.7:8000").status == "pass"  # type: ignore[union-attr]
    assert evaluate_admin_auth(None, url) is None


async def test_ejected_backend_is_listed_with_its_last_error(start_sim, start_router) -> None:
    sims = await start_sim(instances=2)
    url = await start_router([Backend(id=u, url=u, engine="vllm") for u in sims.urls])
    async with httpx.AsyncClient() as client:
        await client.post(f"{sims.urls[1]}/admin/faults", json={"specs": ["health=fail"]})
    await settle(url, "ejected")
    backends = (await doctor(url))["backends"][0]
    assert backends.status == "fail"
    assert sims.urls[1] in backends.summary and "HTTP 503" in backends.summary
    assert backends.fix is not None and "infctl doctor --engine-url" in backends.fix


async def test_policy_sanity_flags_pd_without_decode_and_prefix_over_one_backend(
    start_sim, start_router
) -> None:
    sims = await start_sim(instances=2, roles=("prefill", "both"))
    backends = [
        Backend(id=sims.urls[0], url=sims.urls[0], role="prefill", engine="vllm", group="g0"),
        Backend(id=sims.urls[1], url=sims.urls[1], engine="vllm"),
    ]
    url = await start_router(backends, policy="prefix_precise")
    policy = {r.summary: r for r in (await doctor(url))["policy"]}
    texts = " | ".join(policy)
    assert "group g0 has prefill backends and no decode backend" in texts
    assert "single backend" in texts
    assert "no KV events" in texts
    assert any(r.status == "fail" for r in policy.values())


async def test_unreachable_router_fails_and_skips_the_rest() -> None:
    found = await doctor("http://127.0.0.1:1")
    assert found["health"][0].status == "fail"
    assert found["backends"][0].status == "skip"
