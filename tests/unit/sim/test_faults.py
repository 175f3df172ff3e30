"""Failure injection: ``--fault`` parsing, and each fault on a live engine (set at start or at runtime)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from infctl.errors import ConfigError
from infctl.sim.faults import FaultPlan, parse_duration, parse_faults, plan_update


def test_parse_every_fault() -> None:
    plan = parse_faults(
        ["crash-after=1.5m", "error-rate=0.2:503", "slowdown=3", "hang", "disconnect-after=5", "health=fail"]
    )
    assert plan == FaultPlan(
        crash_after=90.0,
        error_rate=0.2,
        error_status=503,
        slowdown=3.0,
        hang=True,
        disconnect_after=5,
        health_fail=True,
    )
    assert parse_faults(["error-rate=0.5"]).error_status == 503
    assert parse_duration("250ms") == 0.25 and parse_duration("2") == 2.0
    assert FaultPlan(slowdown=2).active() == {"slowdown": 2}


@pytest.mark.parametrize(
    "spec", ["explode", "error-rate=2", "error-rate=0.1:200", "slowdown=0", "health=meh", "crash-after=soon"]
)
def test_bad_fault_specs_are_config_errors(spec: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_faults([spec])
    assert err.value.hint


def test_admin_body_takes_specs_or_fields() -> None:
    assert plan_update({"specs": ["hang", "slowdown=2"]}) == {"hang": True, "slowdown": 2.0}
    assert plan_update({"error_rate": 0.5}) == {"error_rate": 0.5}
    with pytest.raises(ConfigError):
        plan_update({"bogus": 1})
    with pytest.raises(ConfigError):
        plan_update(["hang"])


async def _post(url: str, body: Any) -> httpx.Response:
    async with httpx.AsyncClient(timeout=10) as client:
        return await client.post(f"{url}/v1/completions", json=body)


async def _admin(url: str, method: str, body: Any = None) -> httpx.Response:
    async with httpx.AsyncClient() as client:
        return await client.request(method, f"{url}/admin/faults", json=body)


async def test_crash_resets_connections_and_closes_the_listener(start_sim: Any) -> None:
    cluster = await start_sim(instances=2, time_scale=1.0, faults=parse_faults(["crash-after=0.3s"]))
    victim = cluster.urls[0]
    assert (await _post(victim, {"prompt": "a", "max_tokens": 1})).status_code == 200
    with pytest.raises(httpx.TransportError):
        await _post(victim, {"prompt": "a", "max_tokens": 500})  # still streaming when the crash hits
    assert cluster.instances[0].crashed.is_set()
    with pytest.raises(httpx.ConnectError):
        await _post(victim, {"prompt": "a", "max_tokens": 1})


async def test_crash_can_be_triggered_at_runtime(start_sim: Any) -> None:
    cluster = await start_sim(instances=2)
    assert (await _admin(cluster.urls[1], "POST", {"crash_after": 0})).status_code == 200
    await asyncio.wait_for(cluster.instances[1].crashed.wait(), 5)
    with pytest.raises(httpx.ConnectError):
        await _post(cluster.urls[1], {"prompt": "a", "max_tokens": 1})
    assert (await _post(cluster.urls[0], {"prompt": "a", "max_tokens": 1})).status_code == 200


async def test_error_rate_fails_requests_with_the_engine_error_body(start_sim: Any) -> None:
    url = (await start_sim(faults=parse_faults(["error-rate=1:503"]))).urls[0]
    resp = await _post(url, {"prompt": "a", "max_tokens": 1})
    assert resp.status_code == 503
    assert resp.json()["error"]["type"] == "ServiceUnavailableError" and resp.json()["error"]["code"] == 503
    await _admin(url, "POST", {"specs": ["error-rate=0.5:429"]})
    statuses = [(await _post(url, {"prompt": "a", "max_tokens": 1})).status_code for _ in range(40)]
    assert set(statuses) == {200, 429}
    await _admin(url, "DELETE")
    assert (await _post(url, {"prompt": "a", "max_tokens": 1})).status_code == 200


async def test_slowdown_stretches_every_step(start_sim: Any, scrape: Any) -> None:
    url = (await start_sim(time_scale=1.0)).urls[0]
    await _post(url, {"prompt": "a b c", "max_tokens": 10})
    base = await scrape(url)
    await _admin(url, "POST", {"slowdown": 3})
    await _post(url, {"prompt": "a b c", "max_tokens": 10})
    slow = await scrape(url)
    key = next(k for k in base if k.startswith("vllm:request_decode_time_seconds_sum"))
    first, second = base[key], slow[key] - base[key]
    assert second == pytest.approx(3 * first, rel=0.1)


async def test_hang_accepts_requests_and_never_answers_until_cleared(start_sim: Any) -> None:
    url = (await start_sim(faults=parse_faults(["hang"]))).urls[0]
    hung = asyncio.create_task(_post(url, {"prompt": "a", "max_tokens": 3}))
    await asyncio.sleep(0.2)
    assert not hung.done()
    async with httpx.AsyncClient() as client:
        assert (await client.get(f"{url}/health")).status_code == 200  # a hung engine still looks alive
    view = (await _admin(url, "GET")).json()
    assert view == {"faults": {"hang": True}, "crashed": False}
    await _admin(url, "POST", {"hang": False})
    assert (await asyncio.wait_for(hung, 5)).status_code == 200


async def test_disconnect_after_cuts_streams_and_plain_responses(start_sim: Any, scrape: Any) -> None:
    url = (await start_sim(faults=parse_faults(["disconnect-after=5"]))).urls[0]
    received: list[str] = []
    with pytest.raises(httpx.TransportError):
        async with (
            httpx.AsyncClient(timeout=10) as client,
            client.stream(
                "POST", f"{url}/v1/completions", json={"prompt": "a", "max_tokens": 50, "stream": True}
            ) as resp,
        ):
            async for line in resp.aiter_lines():
                if line.startswith("data: {"):
                    received.append(json.loads(line[6:])["choices"][0]["text"])
    assert len(received) == 5
    with pytest.raises(httpx.TransportError):
        await _post(url, {"prompt": "a", "max_tokens": 50})
    await asyncio.sleep(0.05)
    samples = await scrape(url)
    aborted = next(v for k, v in samples.items() if 'finished_reason="abort"' in k)
    assert aborted == 2


async def test_health_fail(start_sim: Any) -> None:
    cluster = await start_sim(personality="sglang", faults=parse_faults(["health=fail"]))
    url = cluster.urls[0]
    async with httpx.AsyncClient() as client:
        assert (await client.get(f"{url}/health")).status_code == 503
        assert (await client.get(f"{url}/health_generate")).status_code == 503
        await client.post(f"{url}/admin/faults", json={"health_fail": False})
        assert (await client.get(f"{url}/health")).status_code == 200
        assert (await client.get(f"{url}/health_generate")).status_code == 200


async def test_admin_rejects_bad_bodies(sim_url: str) -> None:
    async with httpx.AsyncClient() as client:
        bad_json = await client.post(f"{sim_url}/admin/faults", content=b"{")
        bad_field = await client.post(f"{sim_url}/admin/faults", json={"meteor": True})
        bad_spec = await client.post(f"{sim_url}/admin/faults", json={"specs": ["slowdown=-1"]})
    assert [r.status_code for r in (bad_json, bad_field, bad_spec)] == [400, 400, 400]
    assert "meteor" in bad_field.json()["error"]


async def test_serve_ends_with_an_error_when_every_instance_crashed() -> None:
    from infctl.errors import EngineError
    from infctl.sim.server import SimCluster, serve
    from infctl.sim.settings import SimSettings

    # Two instances and a stop event never set: serve can only end because the fault crashed both of them,
    # once they were up (crash-after counts from start), and it ends by itself rather than waiting for a stop.
    cfg = SimSettings(port=0, instances=2, time_scale=0.01, faults=parse_faults(["crash-after=50ms"]))
    ready, stop = asyncio.Event(), asyncio.Event()
    started: list[SimCluster] = []
    with pytest.raises(EngineError, match="crashed"):
        await asyncio.wait_for(serve(cfg, ready=ready, stop=stop, on_ready=started.append), 60)
    crashed = [inst.crashed.is_set() for inst in started[0].instances]
    assert ready.is_set() and not stop.is_set() and crashed == [True, True], crashed
