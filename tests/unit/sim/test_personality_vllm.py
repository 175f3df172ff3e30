"""The vLLM personality: metric names, labels and buckets, extra endpoints, the NIXL-style PD protocol."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from infctl import tokens
from infctl.engines.versions import image_version, show
from infctl.engines.vllm import ADAPTER
from infctl.sim.profiles import get_profile

MODEL = get_profile("llama3-8b-h100").model
LABELS = f'model_name="{MODEL}",engine="0"'

TTFT = (
    "0.001 0.005 0.01 0.02 0.04 0.06 0.08 0.1 0.25 0.5 0.75 1.0 2.5 5.0 7.5 10.0 20.0 40.0 80.0 160.0 640.0 "
    "2560.0"
)
ITL = "0.01 0.025 0.05 0.075 0.1 0.15 0.2 0.3 0.4 0.5 0.75 1.0 2.5 5.0 7.5 10.0 20.0 40.0 80.0"
LATENCY = (
    "0.3 0.5 0.8 1.0 1.5 2.0 2.5 5.0 10.0 15.0 20.0 30.0 40.0 50.0 60.0 120.0 240.0 480.0 960.0 1920.0 7680.0"
)
TOKENS_32K = "1.0 2.0 5.0 10.0 20.0 50.0 100.0 200.0 500.0 1000.0 2000.0 5000.0 10000.0 20000.0"


def buckets(samples: dict[str, float], family: str) -> str:
    prefix = f"{family}_bucket{{{LABELS},le="
    return " ".join(k[len(prefix) + 1 : -2] for k in samples if k.startswith(prefix))


async def complete(url: str, body: dict[str, Any]) -> dict[str, Any]:
    async with httpx.AsyncClient(timeout=30) as client:
        resp = await client.post(f"{url}/v1/completions", json=body)
        assert resp.status_code == 200, resp.text
        return dict(resp.json())


async def test_metrics_carry_vllm_names_labels_and_buckets(sim_url: str, scrape: Any) -> None:
    prompt = tokens.synth_words(100)
    await complete(sim_url, {"prompt": prompt, "max_tokens": 5})
    await complete(sim_url, {"prompt": prompt, "max_tokens": 5})
    s = await scrape(sim_url)
    for gauge in ("num_requests_running", "num_requests_waiting", "kv_cache_usage_perc"):
        assert s[f"vllm:{gauge}{{{LABELS}}}"] == 0.0
    assert s[f"vllm:prompt_tokens_total{{{LABELS}}}"] == 200
    assert s[f"vllm:generation_tokens_total{{{LABELS}}}"] == 10
    assert s[f"vllm:prefix_cache_queries_total{{{LABELS}}}"] == 200
    assert s[f"vllm:prefix_cache_hits_total{{{LABELS}}}"] == 96
    assert s[f"vllm:num_preemptions_total{{{LABELS}}}"] == 0
    assert s[f'vllm:request_success_total{{{LABELS},finished_reason="length"}}'] == 2
    assert s[f'vllm:num_requests_waiting_by_reason{{{LABELS},reason="capacity"}}'] == 0
    info = next(k for k in s if k.startswith("vllm:cache_config_info{"))
    assert 'block_size="16"' in info and 'num_gpu_blocks="28700"' in info
    assert 'enable_prefix_caching="True"' in info and 'engine="0"' in info
    assert buckets(s, "vllm:time_to_first_token_seconds") == TTFT + " +Inf"
    for family in ("vllm:inter_token_latency_seconds", "vllm:request_time_per_output_token_seconds"):
        assert buckets(s, family) == ITL + " +Inf"
    for phase in ("e2e_request_latency", "request_queue_time", "request_prefill_time", "request_decode_time"):
        assert buckets(s, f"vllm:{phase}_seconds") == LATENCY + " +Inf"
    for family in ("vllm:request_prompt_tokens", "vllm:request_generation_tokens"):
        assert buckets(s, family) == TOKENS_32K + " +Inf"
    assert s[f"vllm:time_to_first_token_seconds_count{{{LABELS}}}"] == 2
    assert s[f"vllm:inter_token_latency_seconds_count{{{LABELS}}}"] == 8
    assert s[f'vllm:request_prompt_tokens_bucket{{{LABELS},le="100.0"}}'] == 2
    assert s[f'vllm:request_prompt_tokens_bucket{{{LABELS},le="50.0"}}'] == 0
    assert not any(k.startswith("vllm:gpu_cache_usage_perc") for k in s)


async def test_exposition_has_help_and_type_for_every_family(sim_url: str) -> None:
    async with httpx.AsyncClient() as client:
        resp = await client.get(f"{sim_url}/metrics")
    assert resp.headers["content-type"] == "text/plain; version=1.0.0; charset=utf-8"  # vLLM 0.32, seen
    lines = resp.text.splitlines()
    typed = {line.split()[2]: line.split()[3] for line in lines if line.startswith("# TYPE")}
    helped = {line.split()[2] for line in lines if line.startswith("# HELP")}
    assert set(typed) == helped
    # prometheus_client's text format: counters are typed under their _total sample name.
    assert typed["vllm:prompt_tokens_total"] == "counter"
    assert typed["vllm:time_to_first_token_seconds"] == "histogram"
    for line in lines:
        if not line.startswith("#"):
            name = line.split("{")[0]
            if typed.get(name) in ("gauge", "counter"):
                continue
            family = name.removesuffix("_bucket").removesuffix("_sum").removesuffix("_count")
            assert typed[family] == "histogram", line


async def test_legacy_metrics_flag_adds_deprecated_names(start_sim: Any, scrape: Any) -> None:
    url = (await start_sim(legacy_metrics=True)).urls[0]
    await complete(url, {"prompt": tokens.synth_words(40), "max_tokens": 3})
    s = await scrape(url)
    assert s[f"vllm:gpu_cache_usage_perc{{{LABELS}}}"] == 0.0
    assert s[f"vllm:gpu_prefix_cache_queries_total{{{LABELS}}}"] == 2  # blocks: 40 tokens // 16
    assert s[f"vllm:time_per_output_token_seconds_count{{{LABELS}}}"] == 2
    assert s[f"vllm:kv_cache_usage_perc{{{LABELS}}}"] == 0.0


async def test_small_cache_preempts(start_sim: Any, scrape: Any) -> None:
    url = (await start_sim(num_gpu_blocks=24)).urls[0]
    bodies = [{"prompt": tokens.synth_words(64, salt=i), "max_tokens": 100} for i in range(6)]
    results = await asyncio.gather(*(complete(url, b) for b in bodies))
    assert all(r["usage"]["completion_tokens"] == 100 for r in results)
    s = await scrape(url)
    assert s[f"vllm:num_preemptions_total{{{LABELS}}}"] > 0
    assert 'num_gpu_blocks="24"' in next(k for k in s if k.startswith("vllm:cache_config_info"))


async def test_tokenize_detokenize_load_and_version(sim_url: str) -> None:
    async with httpx.AsyncClient() as client:
        tok = (await client.post(f"{sim_url}/tokenize", json={"prompt": "hello big world"})).json()
        detok = (await client.post(f"{sim_url}/detokenize", json={"tokens": tok["tokens"]})).json()
        chat = (
            await client.post(f"{sim_url}/tokenize", json={"messages": [{"role": "user", "content": "hi"}]})
        ).json()
        load = (await client.get(f"{sim_url}/load")).json()
        version = (await client.get(f"{sim_url}/version")).json()
    assert tok["count"] == 3 and tok["tokens"] == tokens.token_ids("hello big world")
    assert tok["max_model_len"] == 32_768
    assert detok == {"prompt": "hello big world"}
    assert chat["count"] == 3
    assert load == {"server_load": 0}
    # The release infctl pins (and the slow stage proves), as that vLLM answers it: {"version":"0.32.0"}.
    assert version == {"version": show(image_version(ADAPTER.default_image) or (0, 0, 0))}
    assert version["version"].count(".") == 2


async def test_load_counts_requests_in_flight(start_sim: Any) -> None:
    url = (await start_sim(time_scale=1.0)).urls[0]
    async with httpx.AsyncClient(timeout=30) as client:
        pending = asyncio.create_task(
            client.post(f"{url}/v1/completions", json={"prompt": "a", "max_tokens": 30})
        )
        await asyncio.sleep(0.05)
        load = (await client.get(f"{url}/load")).json()
        await pending
        after = (await client.get(f"{url}/load")).json()
    assert load == {"server_load": 1} and after == {"server_load": 0}


async def test_pd_two_step_protocol(start_sim: Any, scrape: Any) -> None:
    prefill = (await start_sim(roles=("prefill",))).instances[0]
    decode = (await start_sim(roles=("decode",))).instances[0]
    prompt = tokens.synth_words(200, salt=9)
    leg1 = await complete(
        prefill.url,
        {
            "prompt": prompt,
            "max_tokens": 50,
            "kv_transfer_params": {
                "do_remote_decode": True,
                "do_remote_prefill": False,
                "remote_engine_id": None,
                "remote_block_ids": None,
                "remote_host": None,
                "remote_port": None,
            },
        },
    )
    params = leg1["kv_transfer_params"]
    assert leg1["usage"]["completion_tokens"] == 1
    assert params["do_remote_prefill"] is True and params["do_remote_decode"] is False
    assert params["remote_engine_id"] == prefill.engine_id
    assert params["remote_block_ids"] == list(range(13))  # ceil(200 / 16)
    assert params["remote_host"] == "127.0.0.1" and isinstance(params["remote_port"], int)
    body = {"prompt": prompt, "max_tokens": 50, "stream": True, "kv_transfer_params": params}
    body["stream_options"] = {"include_usage": True}
    async with (
        httpx.AsyncClient(timeout=30) as client,
        client.stream("POST", f"{decode.url}/v1/completions", json=body) as resp,
    ):
        events = [
            line[6:] for line in (await resp.aread()).decode().split("\n\n") if line.startswith("data: {")
        ]
    usage = json.loads(events[-1])["usage"]
    assert usage["completion_tokens"] == 50
    assert usage["prompt_tokens_details"]["cached_tokens"] == 200  # the whole prompt arrived as KV
    s = await scrape(decode.url)
    assert s[f"vllm:prefix_cache_hits_total{{{LABELS}}}"] == 0  # nothing was computed or cached locally
    assert s[f"vllm:generation_tokens_total{{{LABELS}}}"] == 50


async def test_a_decode_handshakes_with_the_prefill_its_remote_port_names(start_sim: Any) -> None:
    # Two prefills and a decode in one process, side channels from 18040 (vLLM's variable, not bound).
    sim = await start_sim(instances=3, roles=("prefill", "prefill", "decode"), nixl_side_channel_port=18040)
    p0, p1, decode = sim.instances
    prompt = tokens.synth_words(64, salt=3)
    ask = {"do_remote_decode": True, "do_remote_prefill": False}
    answers = [(await complete(p.url, {"prompt": prompt, "max_tokens": 8, "kv_transfer_params": ask}))
               for p in (p0, p1)]  # fmt: skip
    params = [a["kv_transfer_params"] for a in answers]
    assert [(p["remote_port"], p["remote_engine_id"]) for p in params] == [
        (18040, p0.engine_id),
        (18041, p1.engine_id),
    ]
    async with httpx.AsyncClient(timeout=30) as client:

        async def decode_with(kv: dict[str, Any]) -> httpx.Response:
            body = {"prompt": prompt, "max_tokens": 4, "kv_transfer_params": kv}
            return await client.post(f"{decode.url}/v1/completions", json=body)

        own = [await decode_with(p) for p in params]
        # p0's blocks at p1's side channel: vLLM's handshake finds another engine there and fails.
        crossed = await decode_with({**params[0], "remote_port": 18041})
        # A port no instance of this process listens on (another process's engine): modelled transfer.
        elsewhere = await decode_with({**params[0], "remote_port": 19000})
    assert [r.status_code for r in own] == [200, 200], [r.text for r in own]
    assert crossed.status_code == 500
    assert "engine ID mismatch" in crossed.text and p1.engine_id in crossed.text
    assert elsewhere.status_code == 200


async def test_a_decode_cannot_load_the_kv_of_a_prefill_that_died_after_answering(start_sim: Any) -> None:
    # vLLM 0.32's default kv_load_failure_policy "fail": the accepted request ends with a GenerationError,
    # a 500 "Internal server error" (a stream: 200, that error as its event, then [DONE]).
    sim = await start_sim(instances=2, roles=("prefill", "decode"), nixl_side_channel_port=18050)
    prefill, decode = sim.instances
    prompt = tokens.synth_words(64, salt=5)
    ask = {"do_remote_decode": True, "do_remote_prefill": False}
    answer = await complete(prefill.url, {"prompt": prompt, "max_tokens": 8, "kv_transfer_params": ask})
    body = {"prompt": prompt, "max_tokens": 4, "kv_transfer_params": answer["kv_transfer_params"]}
    async with httpx.AsyncClient(timeout=30) as client:
        before = await client.post(f"{decode.url}/v1/completions", json=body)
        await client.post(f"{prefill.url}/admin/faults", json={"specs": ["crash-after=0"]})
        await asyncio.sleep(0.05)
        after = await client.post(f"{decode.url}/v1/completions", json=body)
        streamed = await client.post(f"{decode.url}/v1/completions", json={**body, "stream": True})
        alone = await client.post(f"{decode.url}/v1/completions", json={"prompt": prompt, "max_tokens": 4})
    assert before.status_code == 200, before.text
    assert after.status_code == 500
    assert after.json()["error"] == {
        "message": "Internal server error", "type": "InternalServerError", "param": None, "code": 500
    }  # fmt: skip
    assert streamed.status_code == 200
    events = [line[6:] for line in streamed.text.splitlines() if line.startswith("data: ")]
    # json.dumps's default spacing (vLLM 0.32 create_streaming_error_response), as the real engine sent in
    # the slow PD kill test (which parses it, not the bytes).
    assert events == [
        '{"error": {"message": "Internal server error", "type": "InternalServerError", "param": null, '
        '"code": 500}}',
        "[DONE]",
    ]
    assert alone.status_code == 200  # without kv_transfer_params the decode prefills for itself


async def test_a_chat_stream_whose_kv_cannot_load_has_its_role_chunk_before_the_error(start_sim: Any) -> None:
    # vLLM 0.32 chat_completion/serving.py chat_completion_stream_generator: the first iteration yields the
    # role chunk of each choice, then _raise_if_error raises the GenerationError that becomes the event.
    sim = await start_sim(instances=2, roles=("prefill", "decode"), nixl_side_channel_port=18060)
    prefill, decode = sim.instances
    messages = [{"role": "user", "content": tokens.synth_words(64, salt=6)}]
    ask = {"do_remote_decode": True, "do_remote_prefill": False}
    async with httpx.AsyncClient(timeout=30) as client:
        leg = {"messages": messages, "max_tokens": 1, "kv_transfer_params": ask}
        answer = (await client.post(f"{prefill.url}/v1/chat/completions", json=leg)).json()
        await client.post(f"{prefill.url}/admin/faults", json={"specs": ["crash-after=0"]})
        await asyncio.sleep(0.05)
        body = {"messages": messages, "max_tokens": 4, "kv_transfer_params": answer["kv_transfer_params"]}
        streamed = await client.post(f"{decode.url}/v1/chat/completions", json={**body, "stream": True})
    assert streamed.status_code == 200
    events = [line[6:] for line in streamed.text.splitlines() if line.startswith("data: ")]
    role, error = json.loads(events[0]), json.loads(events[1])
    assert role["object"] == "chat.completion.chunk"
    assert role["choices"] == [
        {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}
    ]
    assert error["error"] == {
        "message": "Internal server error", "type": "InternalServerError", "param": None, "code": 500
    }  # fmt: skip
    assert events[2:] == ["[DONE]"]


async def test_a_batch_prefill_leg_answers_with_the_first_prompts_kv_transfer_params(start_sim: Any) -> None:
    # vLLM 0.32 (completion/serving.py, request_output_to_completion_response) keeps every prompt's KV for a
    # remote decode but answers with one kv_transfer_params: final_res_batch[0]'s.
    prefill = (await start_sim(roles=("prefill",))).instances[0]
    prompts = [tokens.synth_words(40, salt=1), tokens.synth_words(200, salt=2)]
    ask = {"do_remote_decode": True, "do_remote_prefill": False}
    answer = await complete(prefill.url, {"prompt": prompts, "max_tokens": 50, "kv_transfer_params": ask})
    params = answer["kv_transfer_params"]
    assert params["remote_block_ids"] == list(range(3))  # ceil(40 / 16): the first prompt's blocks only
    assert params["remote_engine_id"] == prefill.engine_id and params["do_remote_prefill"] is True
    assert [c["index"] for c in answer["choices"]] == [0, 1]
    assert answer["usage"]["completion_tokens"] == 2  # one token each, as every prompt is a prefill leg
