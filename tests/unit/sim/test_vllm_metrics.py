"""The simulated vLLM's /metrics lists vLLM 0.32's families (seen on the CPU build after serving requests),
with their types and labels, and values the simulator can compute."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from infctl.sim.personality.engine_view import Capacity
from infctl.sim.personality.vllm_metrics import LEFT_OUT, cache_config_info
from infctl.sim.profiles import get_profile
from infctl.sim.settings import SimSettings
from infctl.tokens import synth_words

TINY = get_profile("tiny-cpu")
LB = f'model_name="{TINY.model}",engine="0"'

VLLM_032 = {
    "vllm:admission_rejections_total": "counter", "vllm:cache_config_info": "gauge",
    "vllm:e2e_request_latency_seconds": "histogram", "vllm:engine_sleep_state": "gauge",
    "vllm:estimated_flops_per_gpu_total": "counter", "vllm:estimated_read_bytes_per_gpu_total": "counter",
    "vllm:estimated_write_bytes_per_gpu_total": "counter", "vllm:external_prefix_cache_hits_total": "counter",
    "vllm:external_prefix_cache_queries_total": "counter", "vllm:generation_tokens_total": "counter",
    "vllm:inter_token_latency_seconds": "histogram", "vllm:iteration_tokens_total": "histogram",
    "vllm:kv_cache_usage_perc": "gauge", "vllm:mm_cache_hits_total": "counter",
    "vllm:mm_cache_queries_total": "counter", "vllm:num_preemptions_total": "counter",
    "vllm:num_requests_running": "gauge", "vllm:num_requests_waiting": "gauge",
    "vllm:num_requests_waiting_by_reason": "gauge", "vllm:prefix_cache_hits_total": "counter",
    "vllm:prefix_cache_queries_total": "counter", "vllm:prompt_tokens_by_source_total": "counter",
    "vllm:prompt_tokens_cached_by_source_total": "counter", "vllm:prompt_tokens_cached_total": "counter",
    "vllm:prompt_tokens_total": "counter", "vllm:request_decode_time_seconds": "histogram",
    "vllm:request_generation_tokens": "histogram", "vllm:request_inference_time_seconds": "histogram",
    "vllm:request_max_num_generation_tokens": "histogram", "vllm:request_num_preemptions": "histogram",
    "vllm:request_params_max_tokens": "histogram", "vllm:request_params_n": "histogram",
    "vllm:request_prefill_kv_computed_tokens": "histogram", "vllm:request_prefill_time_seconds": "histogram",
    "vllm:request_prompt_tokens": "histogram", "vllm:request_queue_time_seconds": "histogram",
    "vllm:request_success_total": "counter", "vllm:request_time_per_output_token_seconds": "histogram",
    "vllm:time_to_first_token_seconds": "histogram",
}  # fmt: skip
"""``# TYPE`` of every vllm: family of vLLM 0.32's CPU build serving the tiny model (but ``_created``)."""


CACHE_CONFIG_032 = (
    "_block_size_resolved", "block_size", "cache_dtype", "cache_hit_alignment_tokens",
    "effective_attention_block_size", "enable_mamba_shared_prefix_checkpoint", "enable_prefix_caching",
    "engine", "gpu_memory_utilization", "hash_block_size", "is_attention_free", "kv_cache_dtype_skip_layers",
    "kv_cache_layout", "kv_cache_max_concurrency", "kv_cache_memory_bytes", "kv_cache_size_tokens",
    "kv_offloading_backend", "kv_offloading_size", "kv_sharing_fast_prefill", "mamba_block_size",
    "mamba_cache_dtype", "mamba_cache_mode", "mamba_page_size_padded", "mamba_ssm_cache_dtype",
    "num_cpu_blocks", "num_gpu_blocks", "num_gpu_blocks_override", "prefix_cache_retention_interval",
    "prefix_caching_hash_algo", "prefix_match_unit", "replayssm_buffer_len", "skip_page_size_padded",
    "sliding_window", "swa_bounded_replay", "use_kda_recoverssm", "use_replayssm",
    "user_specified_block_size",
)  # fmt: skip
"""``vllm:cache_config_info``'s label names, in the order vLLM 0.32's CPU build wrote them (serving the tiny
model; every ``CacheConfig`` attribute and ``engine``)."""


def families(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        if line.startswith("# TYPE vllm:"):
            _, _, name, kind = line.split()
            out[name] = kind
    return out


def labelled(samples: dict[str, float], name: str, label: str) -> dict[str, float]:
    """``{label value: sample}`` of a family's series, by one label."""
    out = {}
    for key, value in samples.items():
        if key.startswith(name + "{"):
            pairs = dict(p.split("=", 1) for p in key[len(name) + 1 : -1].split(","))
            out[pairs[label].strip('"')] = value
    return out


async def test_every_vllm_family_is_there_but_the_gpu_estimates(start_sim: Any) -> None:
    url = (await start_sim(profile="tiny-cpu")).urls[0]
    async with httpx.AsyncClient(timeout=30) as client:
        text = (await client.get(f"{url}/metrics")).text
    want = {n: k for n, k in VLLM_032.items() if n not in LEFT_OUT}
    assert families(text) == want


async def test_request_params_and_prompt_sources_count_as_vllm_does(start_sim: Any, scrape: Any) -> None:
    url = (await start_sim(profile="tiny-cpu")).urls[0]
    prompt = synth_words(100)
    async with httpx.AsyncClient(timeout=30) as client:
        for body in ({"max_tokens": 3}, {"max_tokens": 4, "n": 2}, {"max_tokens": 2}):
            resp = await client.post(f"{url}/v1/completions", json={"prompt": prompt, **body})
            assert resp.status_code == 200, resp.text
    s = await scrape(url)
    # n and the most tokens one sequence generated: once per request (vLLM's ParentRequest), not per sequence.
    assert s[f"vllm:request_params_n_count{{{LB}}}"] == 3 and s[f"vllm:request_params_n_sum{{{LB}}}"] == 4
    assert s[f"vllm:request_max_num_generation_tokens_count{{{LB}}}"] == 3
    assert s[f"vllm:request_max_num_generation_tokens_sum{{{LB}}}"] == 3 + 4 + 2
    assert s[f"vllm:request_num_preemptions_count{{{LB}}}"] == 4
    assert s[f"vllm:request_num_preemptions_sum{{{LB}}}"] == 0
    hits = s[f"vllm:prefix_cache_hits_total{{{LB}}}"]
    total = s[f"vllm:prompt_tokens_total{{{LB}}}"]
    assert hits > 0 and total == 4 * 100
    by_source = labelled(s, "vllm:prompt_tokens_by_source_total", "source")
    assert by_source == {"local_compute": total - hits, "local_cache_hit": hits, "external_kv_transfer": 0}
    assert s[f"vllm:prompt_tokens_cached_total{{{LB}}}"] == hits
    assert s[f"vllm:request_prefill_kv_computed_tokens_sum{{{LB}}}"] == total - hits
    cached = labelled(s, "vllm:prompt_tokens_cached_by_source_total", "source")
    assert cached == {"device": hits, "host": 0, "p2p": 0, "disk": 0, "external_unspecified": 0}
    assert labelled(s, "vllm:engine_sleep_state", "sleep_state") == {
        "awake": 1, "weights_offloaded": 0, "discard_all": 0,
    }  # fmt: skip
    assert labelled(s, "vllm:admission_rejections_total", "reason") == {
        "max_num_queued_reqs": 0, "max_num_queued_tokens": 0,
    }  # fmt: skip
    assert labelled(s, "vllm:request_success_total", "finished_reason") == {
        "stop": 0, "length": 4, "abort": 0, "error": 0, "repetition": 0,
    }  # fmt: skip


async def test_preemptions_are_counted_per_request(start_sim: Any, scrape: Any) -> None:
    url = (await start_sim(profile="tiny-cpu", num_gpu_blocks=40)).urls[0]
    async with httpx.AsyncClient(timeout=60) as client:
        answers = await asyncio.gather(
            *(
                client.post(f"{url}/v1/completions", json={"prompt": synth_words(200, i), "max_tokens": 200})
                for i in range(4)
            )
        )
    assert [a.status_code for a in answers] == [200] * 4
    s = await scrape(url)
    preempted = s[f"vllm:num_preemptions_total{{{LB}}}"]
    assert preempted > 0
    assert s[f"vllm:request_num_preemptions_sum{{{LB}}}"] == preempted
    assert s[f"vllm:request_num_preemptions_count{{{LB}}}"] == 4


async def test_cache_config_info_has_vllm_032s_labels_in_its_order(start_sim: Any) -> None:
    url = (await start_sim(profile="tiny-cpu")).urls[0]
    async with httpx.AsyncClient(timeout=30) as client:
        text = (await client.get(f"{url}/metrics")).text
    line = next(x for x in text.splitlines() if x.startswith("vllm:cache_config_info{"))
    labels = dict(p.split("=", 1) for p in line[len("vllm:cache_config_info{") : line.index("}")].split(","))
    assert tuple(labels) == CACHE_CONFIG_032
    # 512 blocks of 16 tokens, 4,096-token context: 256 blocks a request, room for 2.
    assert labels["kv_cache_max_concurrency"] == '"2.0"' and labels["kv_cache_size_tokens"] == '"8192"'
    assert labels["gpu_memory_utilization"] == '"0.92"' and labels["swa_bounded_replay"] == '"True"'
    assert labels["kv_cache_dtype_skip_layers"] == '"[]"' and labels["hash_block_size"] == '"None"'


def test_cache_config_info_values_are_python_str_of_the_engine_cores() -> None:
    cap = Capacity(
        block_size=16, num_gpu_blocks=1000, max_model_len=4001, max_num_seqs=8, max_num_batched_tokens=2048,
        enable_prefix_caching=False,
    )  # fmt: skip
    labels = cache_config_info(cap, SimSettings(block_size=16, kv_offloading_size=8), "1")
    # A request at max_model_len holds ceil(4001 / 16) = 251 blocks (get_max_concurrency_for_kv_cache_config).
    assert labels["kv_cache_max_concurrency"] == str(1000 / 251)
    assert labels["kv_cache_size_tokens"] == str(int(1000 / 251 * 4001))
    assert labels["num_gpu_blocks"] == "1000" and labels["effective_attention_block_size"] == "16"
    assert labels["enable_prefix_caching"] == "False" and labels["user_specified_block_size"] == "True"
    assert labels["kv_offloading_size"] == "8.0" and labels["engine"] == "1"  # a float, from vLLM's CLI
    assert cache_config_info(cap, SimSettings(), "0")["user_specified_block_size"] == "False"


def test_cache_config_info_of_a_data_parallel_engine_has_its_cores_pools_summed() -> None:
    # vLLM 0.32: the front end sums num_gpu_blocks over its engine cores (v1/engine/core_client.py:851-855)
    # and writes that on each core's sample (v1/metrics/loggers.py:1133-1136); kv_cache_size_tokens and
    # kv_cache_max_concurrency stay one core's (core_client.py:862-872).
    cap = Capacity(
        block_size=16, num_gpu_blocks=1000, max_model_len=4096, max_num_seqs=8, max_num_batched_tokens=2048,
        enable_prefix_caching=True,
    )  # fmt: skip
    one = cache_config_info(cap, SimSettings(), "0")
    for engine in ("0", "1", "2"):
        labels = cache_config_info(cap, SimSettings(data_parallel_size=3), engine)
        assert labels["num_gpu_blocks"] == "3000"
        assert (labels["kv_cache_size_tokens"], labels["kv_cache_max_concurrency"]) == (
            one["kv_cache_size_tokens"],
            one["kv_cache_max_concurrency"],
        )


async def test_waiting_by_reason_has_vllm_032s_help(start_sim: Any) -> None:
    url = (await start_sim(profile="tiny-cpu")).urls[0]
    async with httpx.AsyncClient(timeout=30) as client:
        text = (await client.get(f"{url}/metrics")).text
    # As the CPU build wrote it.
    assert (
        "# HELP vllm:num_requests_waiting_by_reason Number of waiting requests by reason. Reason labels: "
        "'capacity' = waiting for scheduling capacity; 'deferred' = deferred by transient constraints (LoRA "
        "budget, KV transfer, blocked status). Sum of all reasons equals vllm:num_requests_waiting.\n"
    ) in text
