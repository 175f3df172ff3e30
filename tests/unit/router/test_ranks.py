"""Per-rank signals of data-parallel engines: one scrape split by the rank label its adapter names."""

from __future__ import annotations

import httpx
import pytest

from infctl.engines import get_adapter
from infctl.errors import ConfigError, MetricsError
from infctl.router.ranks import Target, backend_id, rank_endpoint, scrape_targets, split_by_rank
from infctl.telemetry.prometheus import parse_metrics

VLLM_DP2 = """\
vllm:num_requests_waiting{model_name="m",engine="0"} 7
vllm:num_requests_waiting{model_name="m",engine="1"} 1
vllm:num_requests_running{model_name="m",engine="0"} 30
vllm:num_requests_running{model_name="m",engine="1"} 4
vllm:kv_cache_usage_perc{model_name="m",engine="0"} 0.9
vllm:kv_cache_usage_perc{model_name="m",engine="1"} 0.1
vllm:cache_config_info{engine="0",block_size="16",num_gpu_blocks="2000"} 1
vllm:cache_config_info{engine="1",block_size="16",num_gpu_blocks="2000"} 1
"""
"""Two engine cores of 1000 blocks each: vLLM 0.32 writes their sum on each one's ``cache_config_info``
(v1/engine/core_client.py:851-855, v1/metrics/loggers.py:1133-1136)."""

SGLANG_DP2 = """\
sglang:num_queue_reqs{model_name="m",tp_rank="0",dp_rank="0"} 3
sglang:num_queue_reqs{model_name="m",tp_rank="0",dp_rank="1"} 0
sglang:num_running_reqs{model_name="m",tp_rank="0",dp_rank="0"} 12
sglang:num_running_reqs{model_name="m",tp_rank="0",dp_rank="1"} 2
sglang:token_usage{model_name="m",tp_rank="0",dp_rank="0"} 0.5
sglang:token_usage{model_name="m",tp_rank="0",dp_rank="1"} 0.25
sglang:max_total_num_tokens{model_name="m",tp_rank="0",dp_rank="0"} 1000
sglang:max_total_num_tokens{model_name="m",tp_rank="0",dp_rank="1"} 3000
sglang:prompt_tokens_total{model_name="m"} 1000
"""


def test_vllm_engine_label_gives_each_rank_its_own_load() -> None:
    vllm = get_adapter("vllm")
    split = split_by_rank(parse_metrics(VLLM_DP2, vllm.wanted_metrics), [0, 1], vllm.dp_rank_label)
    assert split is not None
    r0, r1 = vllm.signals(split[0]), vllm.signals(split[1])
    assert (r0.queue, r0.running, r0.kv_usage) == (7, 30, 0.9)
    assert (r1.queue, r1.running, r1.kv_usage) == (1, 4, 0.1)
    # A rank's own cache_config_info still says both cores' pool: scrape_targets shares it out.
    assert r0.cache_capacity_tokens == 32_000


async def test_vllm_ranks_get_an_equal_share_of_the_engines_pool() -> None:
    vllm = get_adapter("vllm")

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text=VLLM_DP2)

    ranks = [Target(f"a#dp{r}", "http://a", r, vllm) for r in (0, 1)]
    targets = [*ranks, Target("b", "http://b", None, vllm)]
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        got = await scrape_targets(client, targets)
    a0, a1, b = got["a#dp0"], got["a#dp1"], got["b"]
    assert not isinstance(a0, MetricsError) and not isinstance(a1, MetricsError)
    assert not isinstance(b, MetricsError)
    assert a0.cache_capacity_tokens == a1.cache_capacity_tokens == 16_000  # one core's pool, not the sum
    assert b.cache_capacity_tokens == 32_000  # the whole engine: both pools, once
    # Each rank's usage of its own pool counts its own tokens; together, the whole engine's.
    held = [s.kv_usage * (s.cache_capacity_tokens or 0) for s in (a0, a1, b)]
    assert held[0] + held[1] == pytest.approx(held[2])


def test_sglang_dp_rank_label_splits_and_engine_wide_series_go_to_every_rank() -> None:
    sglang = get_adapter("sglang")
    split = split_by_rank(parse_metrics(SGLANG_DP2, sglang.wanted_metrics), [0, 1], sglang.dp_rank_label)
    assert split is not None
    r0, r1 = sglang.signals(split[0]), sglang.signals(split[1])
    assert (r0.queue, r0.running, r0.kv_usage) == (3, 12, 0.5)
    assert (r1.queue, r1.running, r1.kv_usage) == (0, 2, 0.25)
    assert r0.prompt_tokens == r1.prompt_tokens == 1000


def test_no_rank_label_means_no_split() -> None:
    plain = 'vllm:num_requests_waiting{model_name="m"} 2\n'
    assert split_by_rank(parse_metrics(plain), [0, 1], "engine") is None


def test_only_the_adapters_label_splits() -> None:
    # SGLang's gauges also carry tp_rank: splitting on any rank-looking label would cut by tensor rank.
    tp2 = (
        'sglang:num_queue_reqs{model_name="m",tp_rank="0",dp_rank="1"} 5\n'
        'sglang:num_queue_reqs{model_name="m",tp_rank="1",dp_rank="0"} 2\n'
    )
    families = parse_metrics(tp2)
    assert split_by_rank(families, [0, 1], get_adapter("vllm").dp_rank_label) is None
    split = split_by_rank(families, [0, 1], get_adapter("sglang").dp_rank_label)
    assert split is not None
    assert [s.value for s in split[1]["sglang:num_queue_reqs"]] == [5]


async def test_sglang_ranks_scraped_through_the_adapter_get_their_own_queue() -> None:
    sglang = get_adapter("sglang")

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text=SGLANG_DP2)

    targets = [Target(f"s#dp{r}", "http://s", r, sglang) for r in (0, 1)]
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        got = await scrape_targets(client, targets)
    r0, r1 = got["s#dp0"], got["s#dp1"]
    assert not isinstance(r0, MetricsError) and not isinstance(r1, MetricsError)
    assert (r0.queue, r0.running, r1.queue, r1.running) == (3, 12, 0, 2)
    assert (r0.cache_capacity_tokens, r1.cache_capacity_tokens) == (1000, 3000)  # each rank's own pool


async def test_one_scrape_per_url_feeds_each_rank_and_plain_backends() -> None:
    hits: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        hits.append(str(request.url))
        if request.url.host == "dead":
            return httpx.Response(500, text="boom")
        return httpx.Response(200, text=VLLM_DP2)

    vllm = get_adapter("vllm")
    targets = [
        Target("a#dp0", "http://a", 0, vllm),
        Target("a#dp1", "http://a", 1, vllm),
        Target("b", "http://b", None, vllm),
        Target("c#dp0", "http://dead", 0, vllm),
    ]
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        got = await scrape_targets(client, targets)
    assert sorted(hits) == ["http://a/metrics", "http://b/metrics", "http://dead/metrics"]
    a0, a1, b, c = got["a#dp0"], got["a#dp1"], got["b"], got["c#dp0"]
    assert not isinstance(a0, MetricsError) and not isinstance(a1, MetricsError)
    assert not isinstance(b, MetricsError)
    assert (a0.queue, a1.queue, b.queue) == (7, 1, 8)  # a plain backend sees the whole engine
    assert isinstance(c, MetricsError) and "500" in c.message


def test_backend_id_and_rank_endpoint_conventions() -> None:
    assert backend_id("http://e:8000", None) == "http://e:8000"
    assert backend_id("http://e:8000", 3) == "http://e:8000#dp3"
    assert rank_endpoint("tcp://e:5557", None) == "tcp://e:5557"
    assert rank_endpoint("tcp://e:5557", 0) == "tcp://e:5557"
    assert rank_endpoint("tcp://e:5557", 2) == "tcp://e:5559"
    with pytest.raises(ConfigError):
        rank_endpoint("tcp://e", 1)
