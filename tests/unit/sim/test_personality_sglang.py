"""The SGLang personality: metric names and buckets, flat error bodies, native endpoints, bootstrap PD."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from infctl import tokens
from infctl.engines import sglang
from infctl.engines.sglang_launch import IMAGE
from infctl.engines.sglang_pd import DEFAULT_BOOTSTRAP_PORT, NO_BOOTSTRAP_ROOM
from infctl.engines.versions import image_version, show
from infctl.sim.profiles import get_profile
from infctl.telemetry import parse_metrics

MODEL = get_profile("llama3-8b-h100").model
LABELS = f'model_name="{MODEL}",engine_type="unified"'
"""The tokenizer's labels (counters, histograms): 0.5.15's, engine_type by --disaggregation-mode."""
RANKS = ',tp_rank="0",pp_rank="0",moe_ep_rank="0"'
SCHED = LABELS + RANKS
"""The scheduler gauges' labels: 0.5.15's, for the one scheduler (attention-TP rank 0) that reports."""

TTFT = "0.1 0.2 0.4 0.6 0.8 1.0 2.0 4.0 6.0 8.0 10.0 20.0 40.0 60.0 80.0 100.0 200.0 400.0"
E2E = TTFT + " 600.0 1200.0 1800.0 2400.0"
ITL = (
    "0.002 0.004 0.006 0.008 0.01 0.015 0.02 0.025 0.03 0.035 0.04 0.06 0.08 0.1 0.2 0.4 0.6 0.8 1.0 2.0 4.0 "
    "6.0 8.0"
)


def buckets(samples: dict[str, float], family: str) -> str:
    prefix = f"{family}_bucket{{{LABELS},le="
    return " ".join(k[len(prefix) + 1 : -2] for k in samples if k.startswith(prefix))


async def post(url: str, path: str, body: Any) -> httpx.Response:
    async with httpx.AsyncClient(timeout=30) as client:
        return await client.post(f"{url}{path}", json=body)


async def test_metrics_carry_sglang_names_and_buckets(start_sim: Any, scrape: Any) -> None:
    url = (await start_sim(personality="sglang")).urls[0]
    prompt = tokens.synth_words(100)
    for _ in range(2):
        assert (await post(url, "/v1/completions", {"prompt": prompt, "max_tokens": 4})).status_code == 200
    s = await scrape(url)
    assert s[f"sglang:num_running_reqs{{{SCHED}}}"] == 0
    assert s[f"sglang:num_queue_reqs{{{SCHED}}}"] == 0
    assert s[f"sglang:token_usage{{{SCHED}}}"] == 0
    assert s[f"sglang:max_total_num_tokens{{{SCHED}}}"] == 28_700 * 16
    assert s[f"sglang:prompt_tokens_total{{{LABELS}}}"] == 200
    assert s[f"sglang:generation_tokens_total{{{LABELS}}}"] == 8
    assert s[f"sglang:cached_tokens_total{{{LABELS}}}"] == 96
    assert s[f"sglang:cache_hit_rate{{{SCHED}}}"] == 96 / 200
    assert s[f"sglang:gen_throughput{{{SCHED}}}"] >= 0
    # The pinned release's PD queues (0.5.15 srt/observability/metrics_collector.py), not 0.5.4's names.
    for name in sglang.PD_QUEUE_GAUGES:
        assert s[f"{name}{{{SCHED}}}"] == 0
    assert not any(k.startswith(sglang.NUM_PREFILL_PREALLOC_QUEUE_REQS) for k in s)
    assert buckets(s, "sglang:time_to_first_token_seconds") == TTFT + " +Inf"
    assert buckets(s, "sglang:inter_token_latency_seconds") == ITL + " +Inf"
    assert buckets(s, "sglang:e2e_request_latency_seconds") == E2E + " +Inf"
    assert s[f"sglang:e2e_request_latency_seconds_count{{{LABELS}}}"] == 2
    assert not any(k.startswith("vllm:") for k in s)


async def test_retractions_are_counted_the_sglang_way_and_read_as_preemptions(
    start_sim: Any, scrape: Any
) -> None:
    # 0.5.15/0.5.23: sglang:num_retracted_requests_total counts retracted requests (a scheduler counter);
    # sglang:num_retracted_reqs is the latest retraction's size until the next stats log.
    cluster = await start_sim(personality="sglang", num_gpu_blocks=40, block_size=16)
    url = cluster.urls[0]
    body = {"prompt": tokens.synth_words(200), "max_tokens": 150, "ignore_eos": True}
    answers = await asyncio.gather(*(post(url, "/v1/completions", body) for _ in range(6)))
    assert [a.status_code for a in answers] == [200] * 6
    s = await scrape(url)
    retracted = s[f"sglang:num_retracted_requests_total{{{SCHED}}}"]
    assert retracted == cluster.instances[0].stats().preemptions > 0
    assert s[f"sglang:num_retracted_reqs{{{SCHED}}}"] == 0
    async with httpx.AsyncClient() as client:
        text = (await client.get(f"{url}/metrics")).text
    assert sglang.ADAPTER.signals(parse_metrics(text, sglang.ADAPTER.wanted_metrics)).preemptions == retracted


async def test_errors_use_sglang_flat_shape_and_any_model_name_is_served(start_sim: Any) -> None:
    url = (await start_sim(personality="sglang")).urls[0]
    too_long = await post(url, "/v1/completions", {"prompt": "x " * 40_000, "max_tokens": 1})
    assert too_long.status_code == 400
    body = too_long.json()
    assert body["object"] == "error" and body["type"] == "BadRequestError" and body["code"] == 400
    assert "maximum context length of 32768" in body["message"]
    other = await post(url, "/v1/completions", {"prompt": "x", "model": "whatever", "max_tokens": 1})
    assert other.status_code == 200 and other.json()["model"] == "whatever"


async def test_native_endpoints(start_sim: Any) -> None:
    url = (await start_sim(personality="sglang")).urls[0]
    async with httpx.AsyncClient(timeout=30) as client:
        info = (await client.get(f"{url}/get_server_info")).json()
        info_new = (await client.get(f"{url}/server_info")).json()
        model = (await client.get(f"{url}/get_model_info")).json()
        loads = (await client.get(f"{url}/v1/loads")).json()
        legacy = (await client.get(f"{url}/get_load")).json()
        health_gen = await client.get(f"{url}/health_generate")
        models = (await client.get(f"{url}/v1/models")).json()
        await client.post(f"{url}/v1/completions", json={"prompt": tokens.synth_words(40), "max_tokens": 1})
        flushed = await client.post(f"{url}/flush_cache")
        again = (await client.post(f"{url}/v1/completions", json={"prompt": tokens.synth_words(40)})).json()
    assert info["served_model_name"] == MODEL and info["max_total_num_tokens"] == 28_700 * 16
    assert info["disaggregation_mode"] == "null" and info["page_size"] == 16
    assert info_new["context_length"] == 32_768
    # The release the personality imitates (sglang_launch.IMAGE), not 0.5.4's number.
    pinned = show(image_version(IMAGE) or (0, 0, 0))
    assert info["version"] == loads["version"] == pinned and pinned.count(".") == 2
    assert model["model_path"] == MODEL and model["is_generation"] is True
    load = loads["loads"][0]
    assert loads["dp_rank_count"] == 1
    assert {"num_running_reqs", "num_waiting_reqs", "token_usage", "gen_throughput", "cache_hit_rate"} <= set(
        load
    )
    assert legacy == [{"dp_rank": 0, "num_reqs": 0, "num_waiting_reqs": 0, "num_tokens": 0}]
    assert health_gen.status_code == 200
    assert models["data"][0]["owned_by"] == "sglang"
    assert flushed.status_code == 200 and flushed.text.startswith("Cache flushed")
    assert again["usage"]["prompt_tokens_details"]["cached_tokens"] == 0


async def _pd_pair(start_sim: Any) -> tuple[str, str]:
    cluster = await start_sim(personality="sglang", instances=2, roles=("prefill", "decode"))
    return cluster.urls[0], cluster.urls[1]


async def test_pd_decode_waits_for_the_prefill_of_its_room(start_sim: Any, scrape: Any) -> None:
    prefill, decode = await _pd_pair(start_sim)
    prompt = tokens.synth_words(300, salt=4)
    room = 1 << 40
    body = {
        "prompt": prompt,
        "max_tokens": 20,
        "bootstrap_host": "127.0.0.1",
        "bootstrap_port": DEFAULT_BOOTSTRAP_PORT,  # instance 0's bootstrap port
        "bootstrap_room": room,
    }
    decode_task = asyncio.create_task(post(decode, "/v1/completions", body))
    await asyncio.sleep(0.05)
    assert not decode_task.done()  # its KV is not there yet
    decode_sched = SCHED.replace('"unified"', '"decode"')
    assert (await scrape(decode))[f"sglang:num_decode_transfer_queue_reqs{{{decode_sched}}}"] == 1
    # The adapter reads it as waiting, as SGLang's /v1/loads counts it.
    async with httpx.AsyncClient(timeout=30) as client:
        text = (await client.get(f"{decode}/metrics")).text
        loads = (await client.get(f"{decode}/v1/loads")).json()
    assert sglang.ADAPTER.signals(parse_metrics(text, sglang.ADAPTER.wanted_metrics)).queue == 1
    assert loads["loads"][0]["num_waiting_reqs"] == 1
    leg1 = (await post(prefill, "/v1/completions", body)).json()
    leg2 = (await decode_task).json()
    assert leg1["usage"]["completion_tokens"] == 1  # a prefill answers with one token
    assert leg2["usage"]["completion_tokens"] == 20
    assert leg2["usage"]["prompt_tokens_details"]["cached_tokens"] == 300
    prefill_labels = LABELS.replace('"unified"', '"prefill"')
    assert (await scrape(prefill))[f"sglang:prompt_tokens_total{{{prefill_labels}}}"] == 300


async def test_pd_decode_meets_its_rooms_prefill_at_the_bootstrap_port_it_names(start_sim: Any) -> None:
    cluster = await start_sim(personality="sglang", instances=3, roles=("prefill", "prefill", "decode"),
                              pd_wait_timeout=0.5)  # fmt: skip
    _, second, decode = cluster.urls
    for room, port, ok in ((11, DEFAULT_BOOTSTRAP_PORT + 1, True), (12, DEFAULT_BOOTSTRAP_PORT, False)):
        body = {"prompt": "a b c", "max_tokens": 3, "bootstrap_port": port, "bootstrap_room": room}
        decode_task = asyncio.create_task(post(decode, "/v1/completions", body))
        assert (await post(second, "/v1/completions", body)).status_code == 200  # prefilled on instance 1
        answer = await decode_task
        # Instance 1's room, sent to instance 0's bootstrap port: never there, as with SGLang.
        assert (answer.status_code == 200) is ok, answer.text
    assert f"at bootstrap port {DEFAULT_BOOTSTRAP_PORT}" in answer.json()["message"]


async def test_pd_decode_with_a_remote_prefill_charges_the_transfer(start_sim: Any) -> None:
    _, decode = await _pd_pair(start_sim)
    body = {
        "prompt": tokens.synth_words(50),
        "max_tokens": 5,
        "stream": True,
        "bootstrap_host": "10.0.0.9",
        "bootstrap_port": 9999,  # not an instance of this process
        "bootstrap_room": 7,
    }
    async with (
        httpx.AsyncClient(timeout=30) as client,
        client.stream("POST", f"{decode}/v1/completions", json=body) as resp,
    ):
        chunks = [
            json.loads(e[6:]) for e in (await resp.aread()).decode().split("\n\n") if e.startswith("data: {")
        ]
    assert sum(tokens.count_tokens(c["choices"][0]["text"]) for c in chunks) == 5


async def test_pd_failed_prefill_fails_the_waiting_decode(start_sim: Any) -> None:
    prefill, decode = await _pd_pair(start_sim)
    body = {"prompt": "a b", "max_tokens": 3, "bootstrap_port": DEFAULT_BOOTSTRAP_PORT, "bootstrap_room": 99}
    decode_task = asyncio.create_task(post(decode, "/v1/completions", body))
    await asyncio.sleep(0.02)
    async with httpx.AsyncClient() as client:
        await client.post(f"{prefill}/admin/faults", json={"error_rate": 1.0, "error_status": 500})
    assert (await post(prefill, "/v1/completions", body)).status_code == 500
    failed = await decode_task
    assert failed.status_code == 500 and "bootstrap_room 99" in failed.json()["message"]


async def test_pd_engines_refuse_a_request_without_a_bootstrap_room_as_sglang_does(start_sim: Any) -> None:
    cluster = await start_sim(personality="sglang", instances=3, roles=("prefill", "decode", "both"))
    prefill, decode, both = cluster.urls
    body = {"prompt": "a b c", "max_tokens": 3}  # short: a decode engine still never prefills it
    for url in (prefill, decode):
        async with httpx.AsyncClient(timeout=30) as client:
            refused = await client.post(f"{url}/v1/completions", json=body, headers={"x-request-id": "r7"})
            streamed = await client.post(f"{url}/v1/completions", json={**body, "stream": True})
        # Scheduler.handle_generate_request's abort, answered by the OpenAI route as a BadRequestError.
        assert refused.status_code == 400
        assert refused.json() == {
            "object": "error", "message": f"{NO_BOOTSTRAP_ROOM} req.rid='r7'", "type": "BadRequestError",
            "param": None, "code": 400,
        }  # fmt: skip
        # A stream is answered 200 before the scheduler sees the request: its only event is the error.
        assert streamed.status_code == 200
        events = [e for e in streamed.text.split("\n\n") if e]
        assert len(events) == 2 and events[1] == "data: [DONE]"
        error = json.loads(events[0].removeprefix("data: "))["error"]
        assert error["code"] == 400 and error["message"].startswith(NO_BOOTSTRAP_ROOM)
    served = await post(both, "/v1/completions", body)  # no --disaggregation-mode: served whole
    assert served.status_code == 200 and served.json()["usage"]["completion_tokens"] == 3
