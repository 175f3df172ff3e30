from pathlib import Path

import pytest

from infctl.engines import ENGINES, sglang, vllm
from infctl.telemetry import EngineSignals, histogram_quantile, parse_metrics

FIXTURES = Path(__file__).parent / "fixtures"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def _read(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_vllm_signals_from_a_two_engine_data_parallel_scrape() -> None:
    text = _read("vllm_v0_11.prom")
    signals = vllm.ADAPTER.signals(parse_metrics(text, vllm.ADAPTER.wanted_metrics))
    assert signals == EngineSignals(
        queue=3.0,
        running=12.0,
        kv_usage=pytest.approx(0.30),  # type: ignore[arg-type]
        prefix_queries=200_000.0,
        prefix_hits=120_000.0,
        prompt_tokens=250_000.0,
        generation_tokens=60_000.0,
        preemptions=3.0,
        cache_capacity_tokens=2 * 29_000 * 16,  # both engine cores' pool, on each one's sample
        block_size=16,
        prefix_caching=True,
        model_names=(MODEL,),
        deprecated=(),
    )
    assert signals.hit_rate == pytest.approx(0.6)


@pytest.mark.parametrize(
    ("adapter", "fixture"),
    [
        (vllm.ADAPTER, "vllm_v0_11.prom"),
        (vllm.ADAPTER, "vllm_v0_8_deprecated.prom"),
        (sglang.ADAPTER, "sglang_v0_5.prom"),
    ],
)
def test_signals_are_the_same_from_a_filtered_or_a_full_parse(
    adapter: vllm.VLLMAdapter, fixture: str
) -> None:
    text = _read(fixture)
    assert adapter.signals(parse_metrics(text)) == adapter.signals(
        parse_metrics(text, adapter.wanted_metrics)
    )


def test_vllm_deprecated_names_are_read_as_fallbacks_and_reported() -> None:
    signals = vllm.ADAPTER.signals(parse_metrics(_read("vllm_v0_8_deprecated.prom")))
    assert signals.kv_usage == 0.25
    # v0.8 counted prefix-cache blocks: scaled to tokens by the block size (16).
    assert (signals.prefix_queries, signals.prefix_hits) == (500 * 16, 200 * 16)
    assert signals.hit_rate == pytest.approx(0.4)
    assert signals.cache_capacity_tokens == 8192 * 16
    assert set(signals.deprecated) == {
        vllm.GPU_CACHE_USAGE_PERC,
        vllm.GPU_PREFIX_CACHE_QUERIES,
        vllm.GPU_PREFIX_CACHE_HITS,
    }
    assert (signals.queue, signals.running, signals.preemptions) == (1.0, 4.0, 0.0)


def test_vllm_prefers_current_names_when_both_are_present() -> None:
    text = (
        'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.5\n'
        'vllm:gpu_cache_usage_perc{engine="0",model_name="m"} 0.9\n'
        'vllm:prefix_cache_queries_total{engine="0",model_name="m"} 100\n'
        'vllm:prefix_cache_hits_total{engine="0",model_name="m"} 10\n'
        'vllm:gpu_prefix_cache_queries_total{engine="0",model_name="m"} 7\n'
    )
    signals = vllm.ADAPTER.signals(parse_metrics(text))
    assert (signals.kv_usage, signals.prefix_queries, signals.prefix_hits) == (0.5, 100.0, 10.0)
    assert signals.deprecated == ()


def test_vllm_block_counts_without_a_block_size_still_give_the_hit_rate() -> None:
    text = 'vllm:gpu_prefix_cache_queries{model_name="m"} 50\nvllm:gpu_prefix_cache_hits{model_name="m"} 5\n'
    signals = vllm.ADAPTER.signals(parse_metrics(text))
    assert signals.hit_rate == pytest.approx(0.1)
    assert signals.block_size is None and signals.cache_capacity_tokens is None
    assert signals.deprecated == ("vllm:gpu_prefix_cache_queries", "vllm:gpu_prefix_cache_hits")


def test_vllm_data_parallel_pool_is_read_once_from_the_sum_on_every_engines_sample() -> None:
    # vLLM 0.32, -dp 2, 1000 blocks per engine core: the front end writes its one config, num_gpu_blocks
    # summed over its cores (v1/engine/core_client.py:851-855), on each core's sample
    # (v1/metrics/loggers.py:1133-1136); kv_cache_size_tokens stays one core's (core_client.py:862-872).
    text = "".join(
        f'vllm:cache_config_info{{block_size="16",enable_prefix_caching="True",engine="{e}",'
        f'kv_cache_size_tokens="16000",num_gpu_blocks="2000"}} 1.0\n'
        f'vllm:kv_cache_usage_perc{{engine="{e}",model_name="m"}} {usage}\n'
        for e, usage in ((0, 0.5), (1, 0.25))
    )
    signals = vllm.ADAPTER.signals(parse_metrics(text))
    assert signals.cache_capacity_tokens == 2 * 1000 * 16
    # Usage is each core's of its own pool: averaged, times both pools, it counts the tokens both hold.
    assert signals.kv_usage * signals.cache_capacity_tokens == pytest.approx(0.5 * 16_000 + 0.25 * 16_000)


def test_vllm_cache_config_before_profiling_reports_no_capacity() -> None:
    text = 'vllm:cache_config_info{block_size="16",enable_prefix_caching="False",num_gpu_blocks="None"} 1.0\n'
    signals = vllm.ADAPTER.signals(parse_metrics(text))
    assert (signals.cache_capacity_tokens, signals.block_size, signals.prefix_caching) == (None, 16, False)


def test_sglang_signals() -> None:
    signals = sglang.ADAPTER.signals(parse_metrics(_read("sglang_v0_5.prom"), sglang.ADAPTER.wanted_metrics))
    assert signals == EngineSignals(
        queue=4.0,
        running=12.0,
        kv_usage=0.61,
        prefix_queries=500_000.0,
        prefix_hits=310_000.0,
        prompt_tokens=500_000.0,
        generation_tokens=90_000.0,
        preemptions=0.0,
        cache_capacity_tokens=161_721,
        model_names=(MODEL,),
    )
    assert signals.hit_rate == pytest.approx(0.62)


def test_sglang_data_parallel_ranks_add_up_and_usage_averages() -> None:
    text = "".join(
        f'sglang:num_running_reqs{{dp_rank="{r}",model_name="m"}} {run}\n'
        f'sglang:num_queue_reqs{{dp_rank="{r}",model_name="m"}} {q}\n'
        f'sglang:token_usage{{dp_rank="{r}",model_name="m"}} {u}\n'
        f'sglang:max_total_num_tokens{{dp_rank="{r}",model_name="m"}} 1000\n'
        for r, run, q, u in ((0, 3, 1, 0.2), (1, 5, 0, 0.6))
    )
    signals = sglang.ADAPTER.signals(parse_metrics(text))
    assert (signals.running, signals.queue, signals.cache_capacity_tokens) == (8.0, 1.0, 2000)
    assert signals.kv_usage == pytest.approx(0.4)


def test_sglang_legacy_name_label_still_names_the_model() -> None:
    signals = sglang.ADAPTER.signals(parse_metrics('sglang:num_queue_reqs{name="old/model"} 2\n'))
    assert signals.model_names == ("old/model",)


@pytest.mark.parametrize("adapter", list(ENGINES.values()), ids=list(ENGINES))
def test_an_empty_scrape_gives_default_signals(adapter: vllm.VLLMAdapter) -> None:
    assert adapter.signals({}) == EngineSignals()


def test_fixture_histograms_use_the_engines_real_buckets() -> None:
    fams = parse_metrics(_read("vllm_v0_11.prom"), {vllm.TIME_TO_FIRST_TOKEN})
    bounds = sorted({float(s.labels["le"]) for s in fams[vllm.TIME_TO_FIRST_TOKEN + "_bucket"]})
    assert bounds[:-1] == list(vllm.TTFT_BUCKETS)
    assert histogram_quantile(0.5, fams, vllm.TIME_TO_FIRST_TOKEN) is not None
    sg = parse_metrics(_read("sglang_v0_5.prom"), {sglang.INTER_TOKEN_LATENCY})
    assert len(sg[sglang.INTER_TOKEN_LATENCY + "_bucket"]) == len(sglang.ITL_BUCKETS) + 1


def test_token_buckets_are_1_2_5_up_to_the_context_length() -> None:
    assert vllm.token_buckets(1000) == (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0)
    assert vllm.token_buckets(4096)[-1] == 2000.0


def test_metric_name_catalogues_are_consistent() -> None:
    for module in (vllm, sglang):
        assert len(set(module.METRIC_NAMES)) == len(module.METRIC_NAMES)
        assert all(n.startswith(module.NAME + ":") for n in module.METRIC_NAMES)
        assert set(module.TIME_BUCKETS) <= set(module.HISTOGRAMS)
        assert all(list(b) == sorted(b) for b in module.TIME_BUCKETS.values())
    assert set(vllm.bucket_bounds(4096)) == set(vllm.HISTOGRAMS)
    assert vllm.ADAPTER.wanted_metrics >= {vllm.NUM_REQUESTS_WAITING, vllm.GPU_CACHE_USAGE_PERC}


def test_sglang_pd_queue_gauges_carry_their_current_names() -> None:
    # 0.5.15 and 0.5.23 srt/observability/metrics_collector.py: the prefill engine's bootstrap and inflight
    # queues; "sglang:num_prefill_prealloc_queue_reqs" is the older releases' name of the first.
    assert sglang.PD_QUEUE_GAUGES == (
        "sglang:num_prefill_bootstrap_queue_reqs",
        "sglang:num_prefill_inflight_queue_reqs",
        "sglang:num_decode_prealloc_queue_reqs",
        "sglang:num_decode_transfer_queue_reqs",
    )
    assert set(sglang.PD_QUEUE_GAUGES) <= set(sglang.GAUGES)
