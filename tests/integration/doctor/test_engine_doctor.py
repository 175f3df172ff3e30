"""Engine checks against simulated engines started with deliberate faults: each fault found, with its fix."""

from __future__ import annotations

import asyncio

import httpx
from doctorkit import MetricsOff

from infctl.doctor.engine_probe import check_engine
from infctl.doctor.result import CheckResult
from infctl.doctor.targets import EngineTarget
from infctl.telemetry import make_client


async def doctor(
    target: EngineTarget, transport: httpx.AsyncBaseTransport | None = None
) -> dict[str, CheckResult]:
    async with make_client(transport, timeout=5.0) as client:
        return {r.name: r for r in await check_engine(client, target, kv_wait_s=1.5)}


def statuses(found: dict[str, CheckResult]) -> dict[str, str]:
    return {name: r.status for name, r in found.items()}


async def test_healthy_vllm_engine_passes_every_check(start_sim) -> None:
    cluster = await start_sim(model="m1", kv_events_port=0)
    target = EngineTarget(cluster.urls[0], model="m1", kv_events=cluster.instances[0].kv_endpoint)
    found = await doctor(target)
    assert set(statuses(found).values()) == {"pass"}, found
    assert "BlockStored" in found["kv events"].summary


async def test_healthy_sglang_engine_is_recognised_and_passes(start_sim) -> None:
    cluster = await start_sim(personality="sglang", model="m1")
    found = await doctor(EngineTarget(cluster.urls[0], model="m1"))
    assert found["health"].summary.startswith("sglang ready")
    assert found["prefix caching"].status == "pass" and "server_info" in found["prefix caching"].summary
    assert found["kv events"].status == "skip"
    assert {s for n, s in statuses(found).items() if n != "kv events"} == {"pass"}


async def test_deprecated_metric_names_are_warned_with_the_fix(start_sim) -> None:
    cluster = await start_sim(legacy_metrics=True)
    found = await doctor(EngineTarget(cluster.urls[0]))
    dep = found["deprecated metrics"]
    assert dep.status == "warn"
    assert "vllm:gpu_cache_usage_perc" in dep.summary
    assert dep.fix is not None and "--show-hidden-metrics-for-version" in dep.fix
    assert found["metrics"].status == "pass"


async def test_prefix_caching_off_fails_with_the_flag_to_set(start_sim) -> None:
    for personality, flag in (("vllm", "--enable-prefix-caching"), ("sglang", "--disable-radix-cache")):
        cluster = await start_sim(personality=personality, enable_prefix_caching=False)
        found = await doctor(EngineTarget(cluster.urls[0]))
        assert found["prefix caching"].status == "fail", personality
        assert flag in (found["prefix caching"].fix or "")


async def test_prefix_caching_off_passes_when_the_profile_wants_it_off(start_sim) -> None:
    cluster = await start_sim(enable_prefix_caching=False)
    found = await doctor(EngineTarget(cluster.urls[0], prefix_caching=False))
    assert found["prefix caching"].status == "pass"


async def test_metrics_off_fails_with_enable_metrics(start_sim) -> None:
    cluster = await start_sim(personality="sglang")
    found = await doctor(EngineTarget(cluster.urls[0]), MetricsOff())
    assert found["metrics"].status == "fail"
    assert "HTTP 404" in found["metrics"].summary
    assert "--enable-metrics" in (found["metrics"].fix or "")
    assert found["health"].status == "pass"  # told apart as SGLang by its load endpoint


async def test_dead_engine_fails_health_and_skips_the_rest(start_sim) -> None:
    cluster = await start_sim()
    url = cluster.urls[0]
    async with httpx.AsyncClient() as client:
        await client.post(f"{url}/admin/faults", json={"specs": ["crash-after=0"]})
    await asyncio.wait_for(cluster.instances[0].crashed.wait(), 30)
    await asyncio.sleep(0.05)
    found = await doctor(EngineTarget(url))
    assert found["health"].status == "fail"
    assert "ConnectError" in found["health"].summary
    assert found["health"].fix is not None and "URL" in found["health"].fix
    assert found["completion"].status == "skip"


async def test_failing_health_is_reported_per_engine(start_sim) -> None:
    vllm = await start_sim()
    sglang = await start_sim(personality="sglang")
    async with httpx.AsyncClient() as client:
        for url in (vllm.urls[0], sglang.urls[0]):
            await client.post(f"{url}/admin/faults", json={"specs": ["health=fail"]})
    found_v = await doctor(EngineTarget(vllm.urls[0]))
    assert found_v["health"].status == "fail" and "died" in found_v["health"].summary  # vLLM: 503 = dead
    found_s = await doctor(EngineTarget(sglang.urls[0], engine="sglang"))
    assert found_s["health"].status == "fail" and "/health_generate" in found_s["health"].summary


async def test_wrong_served_model_name_fails(start_sim) -> None:
    cluster = await start_sim(model="m1")
    found = await doctor(EngineTarget(cluster.urls[0], model="other"))
    assert found["models"].status == "fail"
    assert "--served-model-name other" in (found["models"].fix or "")


async def test_kv_events_silent_endpoint_fails(start_sim) -> None:
    cluster = await start_sim()
    found = await doctor(EngineTarget(cluster.urls[0], kv_events="tcp://127.0.0.1:1"))
    assert found["kv events"].status == "fail"
    assert "--kv-events-config" in (found["kv events"].fix or "")


async def test_precise_routing_without_kv_events_fails(start_sim) -> None:
    cluster = await start_sim()
    found = await doctor(EngineTarget(cluster.urls[0], precise=True))
    assert found["kv events"].status == "fail"


async def test_vllm_prefill_gets_a_prefill_leg_and_its_side_channel_is_checked(start_sim) -> None:
    cluster = await start_sim(model="m1", roles=("prefill",), nixl_side_channel_port=17100)
    found = await doctor(EngineTarget(cluster.urls[0], model="m1", role="prefill"))
    assert found["completion"].status == "pass"
    channel = found["kv side channel"]
    assert channel.status == "pass" and "127.0.0.1:17100" in channel.summary
    both = await doctor(EngineTarget(cluster.urls[0], model="m1"))
    assert "kv side channel" not in both  # a plain completion names none
