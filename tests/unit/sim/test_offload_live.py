"""``infctl sim --kv-offloading-size``: the tier behind a live engine, seen through ``/metrics``."""

from __future__ import annotations

from typing import Any

import httpx

from infctl import tokens
from infctl.sim.profiles import get_profile

TINY = get_profile("tiny-cpu")
LABELS = f'model_name="{TINY.model}",engine="0"'


async def complete(client: httpx.AsyncClient, url: str, prompt: str) -> dict[str, Any]:
    resp = await client.post(f"{url}/v1/completions", json={"prompt": prompt, "max_tokens": 1})
    assert resp.status_code == 200, resp.text
    return dict(resp.json())


async def test_tier_hits_and_transfers_are_exposed_with_vllm_names(start_sim: Any, scrape: Any) -> None:
    cluster = await start_sim(profile="tiny-cpu", num_gpu_blocks=64, kv_offloading_size=1.0)
    url = cluster.urls[0]
    first = tokens.synth_words(300)
    async with httpx.AsyncClient(timeout=30) as client:
        await complete(client, url, first)
        for salt in range(1, 6):  # 5 * 19 blocks through a 64-block HBM
            await complete(client, url, tokens.synth_words(300, salt=salt))
        again = await complete(client, url, first)
    hit = 299 // 16 * 16
    assert again["usage"]["prompt_tokens_details"]["cached_tokens"] == hit
    s = await scrape(url)
    assert s[f"vllm:external_prefix_cache_hits_total{{{LABELS}}}"] == hit
    assert (
        s[f"vllm:external_prefix_cache_queries_total{{{LABELS}}}"]
        == 7 * 300 - s[f"vllm:prefix_cache_hits_total{{{LABELS}}}"]
    )
    assert s[f'vllm:prompt_tokens_by_source_total{{{LABELS},source="external_kv_transfer"}}'] == hit
    assert s[f'vllm:prompt_tokens_cached_by_source_total{{{LABELS},source="host"}}'] == hit
    block_bytes = TINY.kv_bytes_per_token * TINY.block_size
    assert s[f"vllm:kv_offload_load_bytes_total{{{LABELS}}}"] == hit // 16 * block_bytes
    assert s[f"vllm:kv_offload_store_bytes_total{{{LABELS}}}"] >= 6 * 18 * block_bytes
    assert s[f"vllm:kv_offload_load_time_total{{{LABELS}}}"] > 0
    assert 0 < s[f"vllm:kv_offload_cpu_cache_usage_perc{{{LABELS}}}"] < 0.01
    # vLLM 0.32 keeps its deprecated transfer counters, by direction, for the CPU tier.
    assert (
        s[f'vllm:kv_offload_total_bytes_total{{{LABELS},transfer_type="CPU_to_GPU"}}']
        == hit // 16 * block_bytes
    )
    stored = s[f"vllm:kv_offload_store_bytes_total{{{LABELS}}}"]
    assert s[f'vllm:kv_offload_total_bytes_total{{{LABELS},transfer_type="GPU_to_CPU"}}'] == stored
    loading = s[f"vllm:kv_offload_load_time_total{{{LABELS}}}"]
    assert s[f'vllm:kv_offload_total_time_total{{{LABELS},transfer_type="CPU_to_GPU"}}'] == loading


async def test_offload_families_have_vllm_032s_help(start_sim: Any) -> None:
    url = (await start_sim(profile="tiny-cpu", kv_offloading_size=1.0)).urls[0]
    async with httpx.AsyncClient(timeout=30) as client:
        text = (await client.get(f"{url}/metrics")).text
    helps = dict(
        line[len("# HELP ") :].split(" ", 1) for line in text.splitlines() if line.startswith("# HELP")
    )
    # vLLM 0.32: distributed/kv_transfer/kv_connector/v1/offloading/metrics.py
    assert {k: v for k, v in helps.items() if k.startswith("vllm:kv_offload_") and "cpu_cache" not in k} == {
        "vllm:kv_offload_load_bytes_total": "Total bytes loaded from offload storage to GPU.",
        "vllm:kv_offload_load_time_total": "Total load time from offload storage to GPU, in seconds.",
        "vllm:kv_offload_store_bytes_total": "Total bytes stored from GPU to offload storage.",
        "vllm:kv_offload_store_time_total": "Total store time from GPU to offload storage, in seconds.",
        "vllm:kv_offload_total_bytes_total": "Number of bytes offloaded by KV connector",
        "vllm:kv_offload_total_time_total": "Total time measured by all KV offloading operations",
    }


async def test_no_tier_no_offload_families(sim_url: str, scrape: Any) -> None:
    """No offload family without a tier; the external prefix cache's counters are there, at 0, as vLLM 0.32
    emits them with no KV connector (seen on the CPU build)."""
    s = await scrape(sim_url)
    families = {k.partition("{")[0] for k in s}
    assert not [f for f in families if "offload" in f]
    external = {k.partition("{")[0]: v for k, v in s.items() if "external_prefix" in k}
    assert external == {
        "vllm:external_prefix_cache_queries_total": 0,
        "vllm:external_prefix_cache_hits_total": 0,
    }
